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


@pytest.mark.parametrize("text", [
    "Müşteri Şikâyet Kaydı\nKonu: iade süresi aşıldı, ürün kargoda hasar görmüş.",
    "Kanun'un 11. maddesi kapsamındaki başvurular otuz gün içinde yanıtlanır.",
    "Emlakçı bey yarın daireyi göstermeye gelecek, anahtarı kapıcıya bıraktım.",
    "Karadenizli müşteriler için hamsi kampanyası cuma başlıyor.",
    "Tüm Bel-Sen'e bağlı işyerlerinde toplantı 14.00'te.",
    "Canım bu akşam erken çıkabilir miyiz?",
])
def test_words_that_are_no_name(text: str) -> None:
    assert names(text) == []


def test_a_pronoun_in_a_chat_line_is_no_name_but_the_surname_is() -> None:
    assert "sen" not in names("hakan abi sen de gel akşam, maç var")
    assert names("Kabin memuru Rabia Şen'in talebi reddedildi.") == ["Rabia Şen'in"]


@pytest.mark.parametrize("text, kind", [
    ("Hasta 41 yaşında, Çerkes kökenli; üç gündür ateşi var.", "ethnicity"),
    ("Merhaba, ben Kafkas Kültür Derneği'nin Bursa şubesinde yönetim kurulu üyesiyim.", "association"),
    ("Kalıphanedeki vardiya şefinin iş kazasından sonra kalıcı iş göremezlik raporu çıktı.", "health"),
    ("Kardeşimlere Kürt oldukları için daireyi kiralamadılar.", "ethnicity"),
])
def test_categories_tied_by_context(text: str, kind: str) -> None:
    assert kind in kinds(text)


@pytest.mark.parametrize("text", [
    "Eğitim ve öğretim yılı boyunca sendika temsilcileriyle toplantılar yapılacak mı?",
    "Kadın giyim mağazamızda tesettür koleksiyonu yüzde 30 indirimde.",
])
def test_nouns_that_look_like_a_first_person_verb(text: str) -> None:
    assert not classify(text).sensitive


@pytest.mark.parametrize("text", [
    "14 Mayıs 1950'de Celal Bayar ve Adnan Menderes önderliğindeki parti iktidara geldi.",
    "Sabahattin Ali (1907-1948) Kürk Mantolu Madonna'yı 1943'te yayımladı.",
    "Aziz Sancar (d. 1946) DNA onarımı üzerine çalıştı. Sancar, 2015'te Nobel aldı.",
    "Ödemeyi Karadeniz Fındık Gıda San. ve Tic. A.Ş. hesabına yaptık.",
    "Tedarikçi: Tuzcuoğlu Elektrik, Kozyatağı şubesi",
    "Alıcı firma Marmara Yapı Denetim A.Ş. olarak değişti.",
    "Anadolu Gıda Pazarlama A.Ş. — Halkbank Kızılay Şubesi hesabına yatırınız.",
    "Gebze Sultan Orhan'daki depoya teslim edilecek.",
])
def test_public_figures_firms_and_quarters_are_no_private_person(text: str) -> None:
    assert names(text) == []


@pytest.mark.parametrize("text, expected", [
    ("Tarık Esen'in Rumeli Türkleri Kültür Derneği'ne üyeliği kabul edildi.", ["Tarık Esen'in"]),
    ("Nöbetçi: Okan Tuna (0532 111 45 90)", ["Okan Tuna"]),
    ("Sanık Cafer Dalkılıç (2012 hırsızlık, 2016 yağma) tekrar yargılanıyor.", ["Cafer Dalkılıç"]),
])
def test_a_person_next_to_what_looks_like_a_firm_or_life_dates(text: str, expected: list[str]) -> None:
    assert names(text) == expected


@pytest.mark.parametrize("text", [
    "Sayın Nuri Aksoy, reçeteli ilacınız hazırdır. Eczane Gülbahçe, tel 0232 441 18 70.",
    "Sayın Hilmi Bey, poliçeniz yenilenecek. Yenileme için acente: 0 212 555 40 12 dahili 3",
    "Asansör bakımı nedeniyle kapalıdır. Site Yönetimi: 0 (216) 335 40 40",
])
def test_an_institutions_line_in_a_message_to_a_person_is_not_theirs(text: str) -> None:
    assert "phone" not in kinds(text)


def test_a_persons_fixed_line_after_the_institution_word_stays_personal() -> None:
    text = "Acente: Kaan Yılmaz, ev 0216 345 12 90"
    assert "phone" in kinds(text)


@pytest.mark.parametrize("text, expected", [
    ("Kapora için parayı gönderdim, alıcı Umut Karabulut olarak görünüyor.", ["Umut Karabulut"]),
    ("Yeni kartların teslimi: Leyla Sezer, Baran Oral ve Cem Akıncı imza atacak.",
     ["Leyla Sezer", "Baran Oral", "Cem Akıncı"]),
])
def test_a_given_name_and_surname_the_common_word_list_also_holds(text: str, expected: list[str]) -> None:
    assert names(text) == expected


@pytest.mark.parametrize("text", [
    "Kombiyi Kaya Yapı Market'ten aldık, montajı yetkili servis yaptı.",
    "Çimento Bulut Yapı'da stokta var.",
])
def test_a_firm_named_by_common_words_is_no_person(text: str) -> None:
    assert names(text) == []


def test_a_common_given_name_capitalised_mid_sentence_is_a_name() -> None:
    assert names("Sevgili ekip, Pınar bu hafta izinde, işlerine Kerem bakacak.") == ["Pınar", "Kerem"]


def test_the_same_word_at_a_sentences_start_is_not() -> None:
    assert names("Umut ediyorum yarın yağmur yağmaz.") == []


@pytest.mark.parametrize("text", [
    "1944'te Orta Asya'ya sürgün edilen topluluklar arasında Ahıska Türkleri de vardı.",
    "Kayıp kedimiz Pamuk'u gören olursa lütfen haber versin.",
    "Nuh'un gemisinin Ağrı Dağı'na oturduğuna inanılır.",
])
def test_regions_pets_and_prophets_are_no_private_person(text: str) -> None:
    assert names(text) == []


def test_a_person_after_a_region_word_is_still_a_person() -> None:
    assert names("Müşterimiz Asya Korkmaz siparişini iptal etti.") == ["Asya Korkmaz"]


@pytest.mark.parametrize("text, expected", [
    ("Toplantı notlarını Kerimcan alsın, ben sunumu hazırlarım.", ["Kerimcan"]),
    ("Bugün çok yoruldum 😞 Nevra yarın gelecek, ona sorarız.", ["Nevra"]),
    ("[10:41] Rojbin: yarın izinliyim, kusura bakmayın.", ["Rojbin"]),
])
def test_a_given_name_written_as_a_proper_noun_mid_sentence_is_a_name(text: str, expected: list[str]) -> None:
    assert names(text) == expected


@pytest.mark.parametrize("text", [
    "Yeni 'Nevra' serisi havlular mağazalarda.",  # a product's quoted name
    "Kayıt notu (iade)\nDönüş: 21.03.2025, otogar",  # a field's label at a line's start
    "Bu akşam Kürt Rojbin dansı var dediler.",  # after a capitalised word that is no given name
    "Rojbin yarın gelir mi bilmiyorum.",  # a sentence's start says nothing by its capital
])
def test_a_given_name_word_that_is_no_proper_noun_mid_sentence_is_not(text: str) -> None:
    assert "Rojbin" not in names(text) and "Nevra" not in names(text) and "Dönüş" not in names(text)


def test_chat_speakers_at_lines_starts_are_names_when_two_or_more_speak() -> None:
    chat = "Rojbin: yarın geliyor musun?\nNevra: gelirim, saat kaçta?\nRojbin: onda."
    assert names(chat) == ["Rojbin", "Nevra", "Rojbin"]
    assert names("Rojbin: yarın geliyor musun?") == []  # one label alone may be a field's


@pytest.mark.parametrize("text, expected", [
    ("depodaki tuncay yine geç kaldı, vardiyayı kim kapatacak", ["tuncay"]),
    ("komşunun kızı nevra yarın düğün yapıyor", ["nevra"]),
])
def test_a_given_name_after_its_place_or_a_relation_is_a_name(text: str, expected: list[str]) -> None:
    assert names(text) == expected


@pytest.mark.parametrize("text", [
    "Aşağıdaki WhatsApp mesajını resmi dile çevir.",
    "geçici koruma kapsamındaki Suriyelilerin sayısı azaldı.",
    "depodaki palet yarın gelir",
])
def test_what_stands_after_a_place_word_is_no_name_unless_a_given_name(text: str) -> None:
    assert names(text) == []


@pytest.mark.parametrize("text", [
    "Aydın'dan Selçuk'a giden yolda tabelalar eksik.",
    "Güzergâh: Menemen – Aydın – Nazilli, dönüşte Selçuk'a uğrarız.",
    "Erzincan-Kemah yolu onarım nedeniyle kapalı.",
])
def test_a_place_with_a_locative_or_a_route_of_places_is_no_person(text: str) -> None:
    assert names(text) == []


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
