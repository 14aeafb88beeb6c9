"""Issue 33: the words a postal address is found around, read as the language uses them:
"mahalle" with another suffix than the compound's "-si" is the common noun ("mahallemizdeki
park", "mahalle temsilcisi"), not an address's quarter, and ASCII "koyu" is "köyü" only after a
village's name (otherwise the adjective: "koyu tenli", "koyu Ortodoks"). Sentences written for
these tests."""

from __future__ import annotations

from fairgate.policies.sensitivity import classify


def addresses(text: str) -> list[str]:
    return [text[f.start:f.end] for f in classify(text).findings if f.kind == "person_address"]


def test_the_neighbourhood_as_a_common_noun_is_no_address() -> None:
    assert addresses("Ben Kadir Aslan, mahallemizdeki parkın onarımı için Çiğli'de 12 imza topladık.") == []
    assert addresses("Kadir Aslan mahalle temsilcisi seçildi, Çiğli'de 14 kişi oy verdi.") == []


def test_a_quarter_in_an_address_still_anchors_it() -> None:
    assert addresses("Ali Kaya, Yenice mahallesi 12. sokak no 4 Battalgazi/Malatya")
    assert addresses("ALICI: SEMA UÇAR\nMAHALLE/KÖY: KOCAKÖY No 7 VEZİRKÖPRÜ/SAMSUN")


def test_dark_or_devout_is_not_a_village() -> None:
    assert addresses("Yeni komşumuz Nesrin Aydemir geldi. Eşi koyu Ortodoks, her Paskalya'da Batum'daki "
                     "kiliseye gidiyorlar.") == []
    assert addresses("Hasta Nesrin Aydemir, 34 y. Danışan koyu tenli olduğundan seanslar Rize'de düşük "
                     "enerjiyle başlayacak.") == []


def test_a_village_in_ascii_still_anchors_it() -> None:
    assert addresses("Ali Kaya, Yesilyurt koyu No 12 Ardesen/Rize")
