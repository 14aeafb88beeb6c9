"""Issue 33: person names as people write them -- the learned tagger with its rules: Turkish
case suffixes, titles and relations, lower case, capitals, ASCII-folded text, names from the
whole population; places, companies, streets and test fixtures are not people."""

from __future__ import annotations

import random

import pytest

from fairgate.policies.detection.persons.features import (
    Doc,
    _counted,
    candidates,
    line_casing,
    token_features,
)
from fairgate.policies.detection.persons.lexicon import plain_words
from fairgate.policies.detection.persons.names import (
    MAX_CANDIDATES,
    _opener_only,
    _plain_opener_alone,
    _scan_candidates,
    find_person_names,
)
from fairgate.policies.detection.persons.tagger import default_tagger
from fairgate.policies.sensitivity import classify


def names(text: str) -> list[str]:
    return [text[s:e] for s, e in find_person_names(text) or []]


@pytest.mark.parametrize("text, expected", [
    ("Kargom hâlâ gelmedi, alıcı adı Rukiye Karakoç olarak görünüyor.", ["Rukiye Karakoç"]),
    ("Dün akşam Şehmus'u aradım ama açmadı, yarın tekrar deneyeceğim.", ["Şehmus'u"]),
    ("Sayın Hagop Kalaycıyan, başvurunuz alınmıştır.", ["Hagop Kalaycıyan"]),
    ("Bu dosyayı Gülizar Hanım'a ilet, o imzalayacak.", ["Gülizar"]),
    ("Toplantıya Dr. Berivan Aslan katılamayacak.", ["Berivan Aslan"]),
    ("komşum nurettin amca yine arabasını kapının önüne çekmiş", ["nurettin"]),
    ("MUHATAP: YORGO PAPADOPULOS, ŞİŞLİ / İSTANBUL", ["YORGO PAPADOPULOS"]),
    ("Hastamiz Sukran Celik'in kontrolu persembe gunu.", ["Sukran Celik'in"]),
    ("Kiracı Olena Shevchenko kirayı bu ay geç yatırdı.", ["Olena Shevchenko"]),
])
def test_names_in_many_forms(text: str, expected: list[str]) -> None:
    assert names(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("Kardeşim Alpkan test yaptırmak istemiyor.", ["Alpkan"]),  # a relation before it
    ("dün akşam kızım elifi okuldan aldım", []),  # the tagger's call: no lexicon form "elifi"
    ("yeni gelen stajyer var ya, bugün başladı", []),
    ("Sayın konsolosluk, eşim Yurii Melnyk ile başvuruyoruz.", ["Yurii Melnyk"]),  # a surname no list knows
    ("Merhaba Kutay,\nPazartesi günü izin almam gerekiyor.", ["Kutay"]),  # a greeting
    ("Fadime teyzem de namaza başlamış.", ["Fadime"]),  # an inflected honorific
    ("Kudret abinin kaydı dün alındı.", ["Kudret"]),
    ("Ödemeyi cuma yapabilir miyiz?\nSelen", ["Selen"]),  # a sign-off
    ("Eşref Efendi Sokak 12 numarada oturuyor.", []),  # a street
    ("Annem Çerkez, babam Abhaz; eşim Sırp.", []),  # peoples, not names
    ("Personel Listesi ve Müşteri Hizmetleri", []),  # a role word before a common noun
    ("Hocam selam, ders notlarını gönderir misiniz?", []),
    ("Bizim Gizem'in sevgilisi geldi.", ["Gizem'in"]),  # an apostrophe: a proper noun
    ("Rojhat'ın düğünü cumartesi.", ["Rojhat'ın"]),  # at a sentence's start too
    ("kanka serdar'ın babası hastanede", ["serdar'ın"]),  # lower case
    ("Bu yaz Anadolu'ya, sonra Batum'a ve Roma'ya gittik.", []),  # places abroad and regions
    ("Üyeler Levent'teki ofiste toplandı.", []),  # a district's locative
    ("Bugün teneffüste Hevin ve Armağan kavga etti.", ["Hevin", "Armağan"]),  # across "ve"
    ("yarın standda selin ile ilkay da olacak", ["selin", "ilkay"]),
    ("Katılımcılar: Ozan Çetinkaya, Berfu Oflaz\n- Ozan önümüzdeki hafta izinde.", ["Ozan Çetinkaya", "Berfu Oflaz", "Ozan"]),
    ("Kayseri'nin Ağırnas köyünde doğdu, Urfa'ya taşındı.", []),  # provinces, not names
    ("Raporu Fadime Karaman imzaladı.", ["Fadime Karaman"]),  # a province as a surname
    ("Telefonum aynı, adresim değişti: Flat 3, 27 Lanes, London. Nezihi", ["Nezihi"]),  # prose, not a table
    ("Poliklinik notu — Hasta S.K., 34 y, E\nHIV (+)", ["S.K."]),  # initials after a role
    ("Seans 7 — Danışan: R.E. (K, 31)", ["R.E."]),
    ("T.C. Sağlık Bakanlığı ile A.Ş. arasında", []),
])
def test_names_announced_by_their_context(text: str, expected: list[str]) -> None:
    assert names(text) == expected


@pytest.mark.parametrize("text", [
    "İzmir'den Ankara'ya giden otobüs Afyon'da mola verdi.",
    "Garanti BBVA ve Yapı Kredi yeni faiz oranlarını açıkladı.",
    "Atatürk Caddesi'nde yol çalışması var, Fevzi Çakmak Mahallesi'nden dolaşın.",
    "Sabiha Gökçen Havalimanı'na servis saat 06:00'da kalkıyor.",
    "Kurtuluş Savaşı'nda cepheye katıldı; Zeus Mağarası ile tanınır.",  # events and sites
    "Ocak ayında bütçe revizyonu yapılacak, Cuma günü ofis kapalı.",
    "Yeni sürümde önbellek isabet oranı yüzde on iki arttı.",
])
def test_places_companies_streets_and_calendar_words_are_not_people(text: str) -> None:
    assert names(text) == []


def test_candidates_are_capitalised_non_common_words_and_in_lower_lines_lexicon_names() -> None:
    doc = Doc.of("Bugün Ayşe geldi.\nyarın mehmet gelecek ama çok geç")
    got = [doc.text[slice(*doc.spans[i])] for i in candidates(doc)]
    assert got == ["Ayşe", "yarın", "mehmet", "gelecek"]  # "Bugün": a common word, context only


def test_features_fold_case_suffix_and_line_casing() -> None:
    doc = Doc.of("SAYIN KAYA'YI ARADIM")
    feats = token_features(doc, 1)
    assert feats[:7] == ["bias", "w:kaya", "p3:kay", "s3:aya", "s2:ya", "sh:cU", "len:1"]
    assert "suf:yi" in feats and "c-1:sayin" in feats


def test_tagger_scores_are_probabilities_for_each_candidate() -> None:
    doc = Doc.of("Teşekkürler Zeynep Hanım, kargonuz yola çıktı.")
    probs = default_tagger().scores(doc, [0, 1, 2])
    assert len(probs) == 3 and all(0.0 <= p <= 1.0 for p in probs)
    assert probs[1] > 0.5 > probs[0]


def test_a_name_inside_an_email_address_is_the_address_only() -> None:
    c = classify("yazışmalar için: berfin.aslan@ornekfirma.com.tr")
    assert c.kinds == ("email",)


def test_the_ascii_shortcut_of_a_lines_casing_agrees_with_counting_every_letter() -> None:
    # `line_casing` answers "mixed" from ASCII lower-case letters alone when they are enough; the
    # answer must be the one counting every letter (Turkish ones included) gives
    rng = random.Random(7)
    letters = "aAbBçÇğĞıIiİöÖşŞüÜzZ 0.,\ue000"
    for _ in range(3000):
        line = "".join(rng.choice(letters) for _ in range(rng.randint(1, 40)))
        expected = "lower" if line == line.lower() else "caps" if line == line.upper() else _counted(line)
        assert line_casing(line) == expected, line


def test_a_plain_opener_alone_is_proved_nameless_by_the_full_scan() -> None:
    # `_scan` skips its rules when the only candidate is a prompt's plain first word; on random
    # prompts where it does, the full rules (`_scan_candidates`) must find no name either
    rng = random.Random(11)
    openers = sorted(plain_words())[:200]
    words = ("ayşe", "mehmet", "kaya", "yılmaz", "bey", "hanım", "abla", "teyze", "eşim", "adım", "ile", "ve",
             "hello", "five", "words", "istanbul", "selin'le", "gökhanla", "hacerin", "ahmet:", "@gamze", "merve'nin",
             "Ayşe", "Kaya", "Bey", "S.K.", "0532", "in", "the", "a", "\n", ",", ".", "?")
    fired = 0
    for _ in range(4000):
        text = rng.choice(openers).capitalize() + " " + " ".join(rng.choice(words) for _ in range(rng.randint(0, 9)))
        doc = Doc.of(text)
        cands = candidates(doc)
        if doc.spans and cands == [0] and _plain_opener_alone(doc):
            fired += 1
            assert _scan_candidates(doc, cands, 16, MAX_CANDIDATES)[0] == [], text
    assert fired > 300  # the shortcut was tried often enough to mean something


def test_the_opener_shortcut_read_off_the_text_agrees_with_the_tokens() -> None:
    # `_opener_only` decides from the text alone (no tokens built) that a one-line prompt's only
    # capital is a plain opener; wherever it does, the full scan must find no name, and on
    # prompts it passes over, `find_person_names` still reads every token
    rng = random.Random(12)
    openers = sorted(plain_words())[:200]
    words = ("ayşe", "mehmet", "kaya", "bey", "hanım", "bey'e", "dr.", "sayın", "eşim", "adım", "ile", "hello",
             "five", "words", "istanbul", "selin'le", "gökhanla", "@gamze", "Ayşe", "Kaya", "S.K.", "0532", "in",
             "the", "\ue000", "8", "up", "user", "ÇİĞDEM", "é", "a", ",", ".", "?", "\n")
    fired = 0
    for _ in range(4000):
        text = rng.choice(openers).capitalize() + " " + " ".join(rng.choice(words) for _ in range(rng.randint(0, 9)))
        if _opener_only(text):
            fired += 1
            doc = Doc.of(text)
            assert candidates(doc) == [0] and _plain_opener_alone(doc), text
            assert _scan_candidates(doc, [0], 16, MAX_CANDIDATES)[0] == [], text
    assert fired > 300
    assert not _opener_only("Say hello to ayşe hanım")  # an honorific: the rules read it
    assert find_person_names("Say hello to Ayşe") == [(13, 17)]


@pytest.mark.parametrize("text, expected", [
    ("KAZA TUTANAĞI: KARŞI TARAF SÜRÜCÜSÜ NURHAN ÖZKAN, PLAKA 45 EY 3307.", ["NURHAN ÖZKAN"]),
    ("GENEL KURULDA ŞÜKRAN ALKAYA VE İDRİS BAYSAL YÖNETİME SEÇİLDİ.", ["ŞÜKRAN ALKAYA", "İDRİS BAYSAL"]),
])
def test_a_name_in_capitals_keeps_both_its_words(text: str, expected: list[str]) -> None:
    assert [text[s:e] for s, e in find_person_names(text) or []] == expected


def test_a_school_named_after_a_person_in_capitals_is_no_person() -> None:
    text = "GÖREV YERİ: ŞEHİT ÖĞRETMEN ALİ GÜVEN İLKOKULU"
    assert find_person_names(text) == []
