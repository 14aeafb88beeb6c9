"""Issue 33: a first-person relative or the spoken first person ties a category term to a person
in lower-case and ASCII-only text too ("esim", "oglum", "komsumun oglu", "kullanıyom"), where a
question or conditional elsewhere in the sentence would otherwise make it general. Sentences
written for these tests."""

from __future__ import annotations

from fairgate.policies.sensitivity import classify


def kinds(text: str) -> set[str]:
    return {f.kind for f in classify(text).findings}


def test_my_neighbour_is_a_particular_person() -> None:
    assert "criminal" in kinds("komşumun oğlu hırsızlıktan 3 yıl yattı, şimdi herkes ondan çekiniyor.")


def test_a_relative_does_not_make_a_general_question_personal() -> None:
    assert not kinds("Diyabet hastaları oruç tutabilir mi?")
    assert "health" not in kinds("Kardeşlik nedir? Diyabet hastaları ne yemeli?")


def test_a_conditional_you_is_advice_to_anyone() -> None:
    advice = "Eğer şeker hastasıysanız ya da tansiyon ilacı kullanıyorsanız, oruçtan önce doktorunuza danışın."
    assert "health" not in kinds(advice)
    # "you are" (not "if you are") said to a particular person stays theirs
    assert "health" in kinds("Sayın Ayten Hanım, diyabet hastasısınız, kontrolünüz yaklaştı.")


def test_my_clothing_is_still_the_first_person() -> None:
    assert "appearance" in kinds("Tesettür giyimim yüzünden işe alınmadım.")
