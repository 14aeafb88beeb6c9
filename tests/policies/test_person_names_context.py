"""Issue 33: words the name lexicons hold that are no one's name in running text (a document's
title, a law, an occupation, a people, a union's name, a pronoun), and the contexts that tie a
special category to a person (a clinical note's "Hasta 34 yaşında", the first person's
"üyesiyim", a role's inflected form). Sentences written for these tests."""

from __future__ import annotations

import pytest

from fairgate.policies.detection.persons.names import find_person_names
from fairgate.policies.sensitivity import classify


def names(text: str) -> list[str]:
    return [text[s:e] for s, e in find_person_names(text) or []]


def kinds(text: str) -> set[str]:
    return {f.kind for f in classify(text).findings}


def test_a_pronoun_in_a_chat_line_is_no_name_but_the_surname_is() -> None:
    assert "sen" not in names("hakan abi sen de gel akşam, maç var")
    assert names("Kabin memuru Rabia Şen'in talebi reddedildi.") == ["Rabia Şen'in"]


def test_a_persons_fixed_line_after_the_institution_word_stays_personal() -> None:
    text = "Acente: Kaan Yılmaz, ev 0216 345 12 90"
    assert "phone" in kinds(text)


def test_a_common_given_name_capitalised_mid_sentence_is_a_name() -> None:
    assert names("Sevgili ekip, Pınar bu hafta izinde, işlerine Kerem bakacak.") == ["Pınar", "Kerem"]


def test_the_same_word_at_a_sentences_start_is_not() -> None:
    assert names("Umut ediyorum yarın yağmur yağmaz.") == []


def test_a_person_after_a_region_word_is_still_a_person() -> None:
    assert names("Müşterimiz Asya Korkmaz siparişini iptal etti.") == ["Asya Korkmaz"]


@pytest.mark.parametrize("text", [
    "Yeni 'Nevra' serisi havlular mağazalarda.",  # a product's quoted name
    "Kayıt notu (iade)\nDönüş: 21.03.2025, otogar",  # a field's label at a line's start
    "Bu akşam Kürt Rojbin dansı var dediler.",  # after a capitalised word that is no given name
])
def test_a_given_name_word_that_is_no_proper_noun_mid_sentence_is_not(text: str) -> None:
    assert "Rojbin" not in names(text) and "Nevra" not in names(text) and "Dönüş" not in names(text)


def test_chat_speakers_at_lines_starts_are_names_when_two_or_more_speak() -> None:
    chat = "Rojbin: yarın geliyor musun?\nNevra: gelirim, saat kaçta?\nRojbin: onda."
    assert names(chat) == ["Rojbin", "Nevra", "Rojbin"]
    # one label alone may be a field's ("Dönüş: 21.03.2025" above), but not a given name that is
    # nothing else, before a question
    assert names("Rojbin: yarın geliyor musun?") == ["Rojbin"]


def test_a_titled_person_whose_name_is_a_place_is_still_one_with_a_locative() -> None:
    assert names("Sayın Aydın'dan bir mesaj geldi.") == ["Aydın'dan"]


def findings(text: str) -> list[tuple[str, str]]:
    return [(f.kind, text[f.start : f.end]) for f in classify(text).findings]


@pytest.mark.parametrize("text, people", [
    ("Kayınpederim Arnavut, Üsküp'ten gelmişler.", "Arnavut"),
    ("Yeni muhasebecimiz Özbek, Taşkent'te doğmuş.", "Özbek"),
    ("Bizim ustabaşı da Kürt'müş, Van'da büyümüş.", "Kürt'müş"),
])
def test_a_people_alone_is_an_origin_not_a_name(text: str, people: str) -> None:
    found = findings(text)
    assert ("person_name", people) not in found
    assert any(kind == "ethnicity" for kind, _ in found)


def test_a_people_after_a_given_name_is_a_surname() -> None:
    assert ("person_name", "Ayten Arnavut'un") in findings("Ayten Arnavut'un izin dilekçesi onaylandı.")


def test_a_people_inside_a_first_person_origin_is_no_name() -> None:
    found = findings("Merhaba, ben Lazım, Fındıklı'da büyüdüm; ilanınız için yazıyorum.")
    assert not any(kind == "person_name" for kind, _ in found)
    assert any(kind == "ethnicity" for kind, _ in found)
