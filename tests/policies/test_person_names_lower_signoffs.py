"""Issue 33: a message written all in lower case is signed and spoken in lower case too: a
sign-off with a lexicon surname ("nurhayat ekşi") or a surname's initial ("— sebahat k."), a
rare given name after a dash with a surname no lexicon lists, chat speakers' labels ("rozerin:
..."), an absence note's subject ("zozan bugün okula gelemeyecek"), and the word "adı" announces
("adı nvart."). Not a common word after a dash ("— yağmur yağıyor"), nor a single label
("müşteri: ..."), nor a thing's name ("şirketin adı ..."). Sentences written for these tests."""

from __future__ import annotations

from fairgate.policies.detection.persons.names import find_person_names


def names(text: str) -> list[str]:
    return [text[s:e] for s, e in find_person_names(text) or []]


def test_lower_case_chat_speakers() -> None:
    chat = "[okul aile grubu]\nrojin: yarın servis kaçta\nhelin: sekizde geliyomuş"
    assert {"rojin", "helin"} <= set(names(chat))
