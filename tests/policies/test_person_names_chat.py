"""Issue 33: given names as chat writes them -- lower case with a case ending and no apostrophe,
@mentions, and a name announced by "adım" / "soyadım" -- and the ordinary words that look like
them ("sevgiyle", "umutla", "arasın", "annemin"). Sentences written for these tests."""

from __future__ import annotations

import pytest

from fairgate.policies.detection.persons.inflected import _given_with_ending
from fairgate.policies.detection.persons.names import find_person_names


def names(text: str) -> list[str]:
    return [text[s:e] for s, e in find_person_names(text) or []]


@pytest.mark.parametrize("text, name", [
    ("dün akşam ayşeyle konuştum, yarın gelecekmiş", "ayşeyle"),
    ("bu hafta sonu gökhanla maça gidiyoruz", "gökhanla"),
    ("sakın hacere söyleme, sürpriz olacak", "hacere"),
    ("tuğbanın annesi aradı, okul servisi gecikmiş", "tuğbanın"),
    ("anahtari mehmede biraktim, aksam alirsin", "mehmede"),  # ASCII, d before a vowel
    ("batuhanı da çağıralım mı toplantıya", "batuhanı"),
])
def test_lower_case_given_names_with_a_case_ending(text: str, name: str) -> None:
    assert name in names(text)


@pytest.mark.parametrize("word", [
    "sevgiyle", "umutla", "arasın", "annemin", "bırakın", "yaşında", "caferi", "barlasle", "gökhanle",
])
def test_words_that_only_look_like_an_inflected_name(word: str) -> None:
    assert not _given_with_ending(word)


@pytest.mark.parametrize("text, name", [
    ("@selin toplantı notlarını paylaşır mısın?", "selin"),
    ("@Burak abi servis kaçta kalkıyor?", "Burak"),
    ("tamam @tolga, yarın konuşuruz", "tolga"),
])
def test_mentions_of_people(text: str, name: str) -> None:
    assert name in names(text)


def test_a_mailbox_is_no_mention() -> None:
    assert names("raporu selin@firma.com.tr adresine at") == []


@pytest.mark.parametrize("text, name", [
    ("müşteri: adım anastasia, soyadım kiriakidu, kaydımı güncelleyin", "kiriakidu"),
    ("arayan kadının adı nermin, geri dönüş bekliyor", "nermin"),
])
def test_a_name_announced_by_adim_or_soyadim(text: str, name: str) -> None:
    assert name in names(text)


def test_what_follows_ismi_is_not_always_a_name() -> None:
    assert names("geçen yıl en çok verilen erkek ismi oldu. listede ikinci sırada.") == []


@pytest.mark.parametrize("text, expected", [
    ("yarın toplantıya umut ile ceren de gelecek, sunum kimde?", ["umut", "ceren"]),
    ("sevgi hanımın eşi dün aradı, yarın gelecekmiş", ["sevgi"]),
    ("KOMŞUMUZ MURAT AMCA DÜN AKŞAMDAN BERİ KAYIP", ["MURAT"]),
])
def test_common_given_names_that_are_words_too_in_lines_without_casing(text: str, expected: list[str]) -> None:
    assert [n for n in names(text) if n in expected] == expected


def test_two_common_words_joined_by_ile_are_no_names() -> None:
    assert names("yarın ekmek ile peynir alalım, akşam misafir var") == []


@pytest.mark.parametrize("text, expected", [
    ("Sokak lambası yanmıyor. Adres: Çamlık yolu 4, 48600 Ortaca/Muğla. Nurcan", ["Nurcan"]),
    ("İade yapılmadı, iki haftadır ses yok. Nurcan Aydoğdu, 0538 112 90 47", ["Nurcan Aydoğdu"]),
    ("Formu nereden alabiliriz? - Nurcan, 11-B", ["Nurcan"]),
])
def test_a_sign_off_after_an_address_or_before_a_number_or_class(text: str, expected: list[str]) -> None:
    assert [text[s:e] for s, e in find_person_names(text) or []] == expected


def test_a_common_word_before_a_number_is_no_sign_off() -> None:
    assert find_person_names("İade yapılmadı, iki haftadır ses yok. Müşteri hizmetleri, 0538 112 90 47") == []
