"""Issue 33: names that are no private person's, in genres with no personal data: the made-up
people of a numbered arithmetic worksheet, and an encyclopaedic entry whose life dates carry a
place ("(1807, Develi – 1866)", "(d. 8 Eylül 1946, Savur)"). Sentences written for these tests."""

from __future__ import annotations

from fairgate.policies.sensitivity import classify


def names(text: str) -> list[str]:
    return [text[f.start:f.end] for f in classify(text).findings if f.kind == "person_name"]


def test_a_word_problems_people_are_made_up() -> None:
    sheet = ("Soru 1: Elif'in 18 kalemi var. Kalemlerinin yarısını Burak'a veriyor. Elif'in kaç kalemi kalır?\n"
             "Soru 2: Can ile Deniz'in yaşları toplamı 24'tür. Can, Deniz'den 2 yaş büyükse Deniz kaç yaşındadır?")
    assert names(sheet) == []


def test_a_question_of_how_many_without_a_worksheet_keeps_the_name() -> None:
    assert names("Elif'e kaç lira borcun kaldı, Burak Yılmaz sordu.")


def test_life_dates_with_a_place_make_an_encyclopaedic_entry() -> None:
    assert names("Kerem Şairoğlu (1812, Niğde – 1870), asıl mesleği kalaycılık olan halk ozanı.") == []
    assert names("Nurettin Sağlamer (d. 3 Mart 1931, Kemah), fizikçi ve yazar.") == []
    # a person's own note with a year and a place in brackets stays a name
    assert names("Kerem Şairoğlu (2019, Niğde şubesi) iade talebinde bulundu.")


def test_a_shop_or_housing_estate_named_after_a_person_is_not_one() -> None:
    # a pharmacy or a housing estate bears a name the way a street does
    assert names("Kiracı: Yıldırım Eczanesi, aylık kira 24.000 TL.") == []
    assert names("İlacınızı bugün Deniz Eczanesi'nden teslim alabilirsiniz.") == []
    assert "Sun Park" not in names("Adresim Gül Cad. Sun Park Sitesi B-12 Alanya.")
    # the tenant named on their own stays a name
    assert names("Kiracı: Halil Yıldırım, aylık kira 24.000 TL.") == ["Halil Yıldırım"]


def test_a_place_and_its_origin_suffix_is_an_origin_not_a_name() -> None:
    # "-li" after a place's name says where someone is from, after a relation too
    assert names("yeni gelen komşumuz mardinli, evde arapça konuşuyolar, çok iyi insanlar") == []
    assert names("ben laz degilim kardesim, her Rizeli laz mi? annem ahiska turku") == []
    # with an honorific after it, or a given name before it, it is a surname
    assert names("Bizim ustamız Konyalı Bey çok titizdir.") == ["Konyalı"]
    assert names("Ahmet Konyalı yarın gelecek.") == ["Ahmet Konyalı"]
