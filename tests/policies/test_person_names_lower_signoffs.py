"""Issue 33: a message written all in lower case is signed and spoken in lower case too: a
sign-off with a lexicon surname ("nurhayat ekşi") or a surname's initial ("— sebahat k."), a
rare given name after a dash with a surname no lexicon lists, chat speakers' labels ("rozerin:
..."), an absence note's subject ("zozan bugün okula gelemeyecek"), and the word "adı" announces
("adı nvart."). Not a common word after a dash ("— yağmur yağıyor"), nor a single label
("müşteri: ..."), nor a thing's name ("şirketin adı ..."). Sentences written for these tests."""

from __future__ import annotations

import pytest

from fairgate.policies.detection.persons.names import find_person_names


def names(text: str) -> list[str]:
    return [text[s:e] for s, e in find_person_names(text) or []]


@pytest.mark.parametrize("text, name", [
    ("kargom üç haftadır gelmedi, paramı geri istiyorum. gülsüm keskin", "gülsüm keskin"),
    ("toplantıya ben gelemiyorum, notları atarsanız sevinirim. — saniye t.", "saniye"),
    ("tamam teşekkürler, yarın uğrarım. — berfin zeytinkoparan", "berfin"),
    # a given name that is also a word, then a surname no lexicon lists
    ("ödevi yarın getiririm, bugün hastaneye gidiyorum. — ırmak dokuyucu", "ırmak dokuyucu"),
])
def test_a_lower_case_sign_off(text: str, name: str) -> None:
    assert name in names(text)


def test_lower_case_chat_speakers() -> None:
    chat = "[okul aile grubu]\nrojin: yarın servis kaçta\nhelin: sekizde geliyomuş"
    assert {"rojin", "helin"} <= set(names(chat))


@pytest.mark.parametrize("text", [
    "kargo gelmedi hala. — yağmur yağıyor",
    "harika bir gündü — umut ederim tekrarlarız",  # a word, then an inflected verb
    "müşteri: kartım bloke olmuş\ntemsilci: hemen bakıyorum",
    "[not]\nrojin: yarın servis kaçta",  # one label alone may be a field's
])
def test_no_name_in_lower_case_without_a_signature_or_two_speakers(text: str) -> None:
    assert names(text) == []


@pytest.mark.parametrize("text, name", [
    ("zozan bugün okula gelemeyecek, midesi bulanıyor", "zozan"),
    ("mert yarın işe gelmiyo, dişçiye gidecek", "mert"),
])
def test_an_absence_notes_subject(text: str, name: str) -> None:
    assert name in names(text)


@pytest.mark.parametrize("text", [
    "yağmur bugün yağmıyor, mangal yapalım",
    "kargo bugün gelmiyor, yarın dağıtıma çıkacak",
])
def test_no_absence_without_a_given_name_or_a_coming(text: str) -> None:
    assert names(text) == []


@pytest.mark.parametrize("text, name", [
    ("sınıfa yeni bir kız geldi. adı nvart. çok sessiz biri", "nvart"),  # a word no lexicon knows, ending the sentence
    ("KOMŞUNUN KIZI DA GELDİ, ADI DA GÜLSEREN", "GÜLSEREN"),  # "adı da ..."
])
def test_a_name_its_naming_word_announces(text: str, name: str) -> None:
    assert name in names(text)


@pytest.mark.parametrize("text", ["şirketin adı değişti.", "projenin adı zephyr."])
def test_a_things_name_or_a_verb_after_adi_is_no_persons(text: str) -> None:
    assert names(text) == []
