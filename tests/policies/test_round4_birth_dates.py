"""Birth dates written as people write them (issue 33, round 4): passports' short months, a
month and a year, a date and a birthplace before "doğumlu", one's birthday without the year,
an ID card's date, a chat answer after a timestamp, JSON and SQL values; placeholders are none."""

from __future__ import annotations

from fairgate.policies.sensitivity import classify


def _dates(text: str) -> list[str]:
    return [text[f.start:f.end] for f in classify(text).findings if f.kind == "birth_date"]


def test_a_passports_short_month_and_a_month_with_a_year() -> None:
    assert _dates("SOYADI: KARAGÖZ | ADI: EMİNE | DOĞUM TARİHİ: 04 AĞU 1979 | UYRUĞU: TUR") == ["04 AĞU 1979"]
    assert _dates("Date of birth / Doğum tarihi: 11 KAS/NOV 1988") == ["11 KAS/NOV 1988"]
    assert _dates("başvuran: Fidan Yücel, doğum Eylül 1993, Malatya") == ["Eylül 1993"]


def test_a_date_or_year_then_a_place_or_month_before_doğumlu() -> None:
    assert _dates("Şüpheli Levent Acar, 03/11/1990 Bafra doğumlu, ifadesinde") == ["03/11/1990"]
    assert _dates("ben 1987 Kasım doğumluyum, askerlik tecilim bitti") == ["1987 Kasım"]
    assert _dates("Mustafa Kemal 1881 Selanik doğumlu") == []  # no digits taken from inside a year


def test_ones_birthday_without_a_year_and_the_date_on_an_id_card() -> None:
    assert _dates("Kübra'nın doğum günü 19 Ekim'de, kafeyi ayırtalım mı?") == ["19 Ekim"]
    assert _dates("babamın gerçek günü başka ama kimlikte 1 ocak 1958 yazıyor") == ["1 ocak 1958"]
    assert _dates("dedem 90 yaşında, nüfusta 1936 görünüyo ama daha yaşlı") == ["1936"]


def test_a_chat_answer_after_a_timestamp() -> None:
    text = "[09:02] Asistan: Doğrulama için doğum tarihiniz nedir?\n[09:03] Müşteri: 2 şubat 1977"
    assert _dates(text) == ["2 şubat 1977"]


def test_json_and_sql_values_and_placeholders() -> None:
    assert _dates('{"uid": 81, "name": "Berk Sayan", "birth": "1999-07-04", "kyc": "ok"}') == ["1999-07-04"]
    sql = ("INSERT INTO musteri (no, ad, d_tarihi, eklendi) VALUES\n"
           "(7, 'Selin Oral', '1984-10-22', CURRENT_TIMESTAMP()),\n(8, 'Nur Ak', NULL, NOW());")
    assert _dates(sql) == ["1984-10-22"]
    assert _dates('ornek_kayit(ad="Deneme", dogum="01.01.1900")') == []
    assert _dates("DOĞUM TARİHİ: 01.01.1900 (örnek form)") == []


def test_a_cohort_born_in_a_year_is_no_ones_birth_date() -> None:
    assert _dates("DUYURU: 2007 DOĞUMLU YÜKÜMLÜLERİN YOKLAMA İŞLEMLERİ BAŞLAMIŞTIR") == []
    assert _dates("1960 doğumlular bu yıl emekliliğe hak kazanıyor") == []
    assert _dates("Ayten 1968 doğumlu, emekli öğretmen") == ["1968"]
