"""Issue 33: a first-person relative or the spoken first person ties a category term to a person
in lower-case and ASCII-only text too ("esim", "oglum", "komsumun oglu", "kullanıyom"), where a
question or conditional elsewhere in the sentence would otherwise make it general. Sentences
written for these tests."""

from __future__ import annotations

import pytest

from fairgate.policies.sensitivity import classify


def kinds(text: str) -> set[str]:
    return {f.kind for f in classify(text).findings}


@pytest.mark.parametrize("text, kind", [
    ("esim diyabet hastasi, ne yemeli sizce?", "health"),
    ("oglum epilepsi ilaci kullaniyor, okulda nobet gecirirse ne yapmali", "health"),
])
def test_a_relative_typed_without_turkish_letters_outweighs_a_question(text: str, kind: str) -> None:
    assert kind in kinds(text)


def test_my_neighbour_is_a_particular_person() -> None:
    assert "criminal" in kinds("komşumun oğlu hırsızlıktan 3 yıl yattı, şimdi herkes ondan çekiniyor.")


@pytest.mark.parametrize("text", ["hala lustral kullanıyom", "iki haftadır kemoterapiye gidiyom"])
def test_the_spoken_first_person_present(text: str) -> None:
    assert "health" in kinds(text)


def test_a_relative_does_not_make_a_general_question_personal() -> None:
    assert not kinds("Diyabet hastaları oruç tutabilir mi?")
    assert "health" not in kinds("Kardeşlik nedir? Diyabet hastaları ne yemeli?")


def test_a_conditional_you_is_advice_to_anyone() -> None:
    advice = "Eğer şeker hastasıysanız ya da tansiyon ilacı kullanıyorsanız, oruçtan önce doktorunuza danışın."
    assert "health" not in kinds(advice)
    # "you are" (not "if you are") said to a particular person stays theirs
    assert "health" in kinds("Sayın Ayten Hanım, diyabet hastasısınız, kontrolünüz yaklaştı.")


@pytest.mark.parametrize("text", [
    "Bahar sezonu tesettür koleksiyonumuzda keten tunikler ve şifon şallar sizi bekliyor.",
    "Tesettür giyim mağazamızda yeni ürünler! Şal 199 TL, pardösü 899 TL.",
])
def test_a_shops_goods_and_clothing_are_no_first_person(text: str) -> None:
    # "koleksiyonumuz" is our goods, not our colleague; "giyim" is clothing, not "my ..."
    assert kinds(text) == set()


def test_my_clothing_is_still_the_first_person() -> None:
    assert "appearance" in kinds("Tesettür giyimim yüzünden işe alınmadım.")


@pytest.mark.parametrize("text", [
    "Konferansta DNA onarım mekanizmaları ve hücre döngüsü anlatıldı.",
    "Broşürde insülin kullanım kılavuzu ve saklama koşulları yer alıyor.",
])
def test_a_noun_made_with_im_is_no_my(text: str) -> None:
    # "onarım" (repair), "kullanım" (use): nouns from verbs, not "my ..."
    assert kinds(text) == set()


@pytest.mark.parametrize("text", ["Eşimde siğil var.", "Eşinde MS tanısı konmuş."])
def test_the_spouse_in_the_locative_or_ablative_is_a_particular_person(text: str) -> None:
    assert "health" in kinds(text)
