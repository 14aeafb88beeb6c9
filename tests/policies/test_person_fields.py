"""Names in person fields (`policies.detection.persons.fields`): the label says the value is a
person, the lexicons say the value looks like a name."""

from fairgate.policies.sensitivity import classify


def _names(text: str) -> list[str]:
    return [text[f.start:f.end] for f in classify(text).findings if f.kind == "person_name"]


def test_log_key_value_and_form_fields_hold_names() -> None:
    assert _names("09:14 info faceauth: kayit tamam personel=Eylem Karabacak cihaz=k2") == ["Eylem Karabacak"]
    assert _names("YÖNETİM KURULU\nSAYMAN: DOĞAN EREN\n") == ["DOĞAN EREN"]
    assert _names('{"sahibi": "Nazar Hakobyan", "taksit": 3}') == ["Nazar Hakobyan"]


def test_a_chat_speakers_words_and_non_names_are_not_names() -> None:
    assert _names("Musteri: kart no 4543 skt 08/27") == []
    assert _names("Musteri: selam siparisim nerde kaldi") == []
    assert _names("Alıcı: Marmara Lojistik A.Ş.") == []
    assert _names("hasta: evet") == []
