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
    # a contact label and a call's role label ("GSM" is in the surname list)
    assert _names("Ad Soyad: Kübra Özdağ\nGSM: 0507 330 28 14") == ["Kübra Özdağ"]
    assert _names("Temsilci: Numaranız?\nArayan (Fikri Çelebi): Tabii.\nTemsilci: Teşekkürler.") == ["Fikri Çelebi"]


def test_full_name_and_surname_labels_hold_names_no_list_knows() -> None:
    assert _names("GÖNÜLLÜ KAYIT FORMU\nAD SOYAD: ARŞALUYS BEDROSYAN\nİNANÇ: ERMENİ") == ["ARŞALUYS BEDROSYAN"]
    assert _names('{"customer": {"name": "Nazlı Bağdasaryan", "phone": ""}}') == ["Nazlı Bağdasaryan"]
    assert _names("GEBE: HAVVA TURGUTALP (GEBELİK 19. HAFTA)") == ["HAVVA TURGUTALP"]  # a village word
    assert _names("SATILIK. İLETİŞİM: HALİME AKÇA — 0532") == ["HALİME AKÇA"]


def test_a_quoted_value_that_holds_more_than_a_name_is_no_name() -> None:
    assert _names('{"sku": "CKC-44", "name": "Çiçek desenli nevresim", "price": 749.00}') == []


def test_a_surname_that_is_a_common_word_ends_a_field_after_a_given_name() -> None:
    assert _names("INFO kayit yuklendi user_id=55 ad=Filiz Kumsal dosya=ok") == ["Filiz Kumsal"]
    assert _names("ADI SOYADI: GÜLTEN YELKOVAN\nT.C. KİMLİK NO: yok") == ["GÜLTEN YELKOVAN"]
    assert _names("Gönderen: Yıldız Tekstil San. ve Tic. Ltd. Şti.") == []  # the value goes on: a firm
    assert _names("Alıcı: Yıldız Tekstil") == []  # a trade word makes it a firm


def test_a_surnames_ending_makes_an_unknown_word_a_surname() -> None:
    # no lexicon knows either word; only the ending says the second is a surname
    assert _names('{"customer": {"name": "Vrej Tavityan", "phone": ""}}') == ["Vrej Tavityan"]
    # without the ending the second word is not joined; the name field's first word, a given
    # name no lexicon knows, is still read as one by the tagger
    assert _names('{"customer": {"name": "Vrej Tavitler", "phone": ""}}') == ["Vrej"]


def test_a_lower_case_surname_field_no_lexicon_knows_is_read_without_error() -> None:
    # a surname the lexicons lack, taken as one by its ending, in a lower-case record: the field
    # rule looked its lexicon letters up by key and raised (the request then failed closed)
    text = '{"musteri": {"ad": "anna", "soyad": "kowalska", "urunler": 4}}'
    found = classify(text)
    assert found.sensitive and [text[f.start:f.end] for f in found.findings if f.kind == "person_name"] == \
        ["anna", "kowalska"]
