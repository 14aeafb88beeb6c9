"""Issue 33: given names as chat writes them -- lower case with a case ending and no apostrophe,
@mentions, and a name announced by "adım" / "soyadım" -- and the ordinary words that look like
them ("sevgiyle", "umutla", "arasın", "annemin"). Sentences written for these tests."""

from __future__ import annotations

import pytest

from fairgate.policies.detection.persons.inflected import _given_with_ending
from fairgate.policies.detection.persons.names import find_person_names


def names(text: str) -> list[str]:
    return [text[s:e] for s, e in find_person_names(text) or []]


@pytest.mark.parametrize("word", [
    "sevgiyle", "umutla", "arasın", "annemin", "bırakın", "yaşında", "caferi", "barlasle", "gökhanle",
])
def test_words_that_only_look_like_an_inflected_name(word: str) -> None:
    assert not _given_with_ending(word)


def test_a_mailbox_is_no_mention() -> None:
    assert names("raporu selin@firma.com.tr adresine at") == []


def test_what_follows_ismi_is_not_always_a_name() -> None:
    assert names("geçen yıl en çok verilen erkek ismi oldu. listede ikinci sırada.") == []


def test_two_common_words_joined_by_ile_are_no_names() -> None:
    assert names("yarın ekmek ile peynir alalım, akşam misafir var") == []


def test_a_common_word_before_a_number_is_no_sign_off() -> None:
    assert find_person_names("İade yapılmadı, iki haftadır ses yok. Müşteri hizmetleri, 0538 112 90 47") == []
