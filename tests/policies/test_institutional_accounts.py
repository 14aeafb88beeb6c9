"""Issue 33: an IBAN a body gives as its own account -- a foundation, municipality, enforcement
office, association or school's parents' union speaking of itself ("Vakfımızın", "DAİREMİZİN",
"dernek hesabına", "Okul Aile Birliği hesabı") -- is a legal person's, not personal data (by
default); a couple's joint account or one in a person's name stays personal. So is a firm's tax
number on its own page, though the firm is named a few lines before it. Sentences written for
these tests; the IBAN's and VKN's check digits are valid."""

from __future__ import annotations

from fairgate.policies.sensitivity import classify

IBAN = "TR33 0006 1005 1978 6457 8413 26"


def ibans(text: str) -> list[str]:
    return [text[f.start:f.end] for f in classify(text).findings if f.kind == "iban"]


def test_a_bodys_own_account_is_a_legal_persons() -> None:
    assert ibans(f"Kurban bağışlarınızı Vakfımızın {IBAN} numaralı hesabına gönderebilirsiniz.") == []
    assert ibans(f"MAAŞININ 1/4'ÜNÜN DAİREMİZİN {IBAN} NUMARALI HESABINA YATIRILMASI RİCA OLUNUR.") == []
    assert ibans(f"Aidatinizi {IBAN} numarali dernek hesabina yatirabilirsiniz.") == []
    assert ibans(f"Bağışlarınız için Okul Aile Birliği hesabı: {IBAN}") == []
    assert ibans(f"Yıllık aidatınızı {IBAN} numaralı kulüp hesabına yatırabilirsiniz.") == []


def test_a_firms_page_names_the_firm_well_before_its_tax_number() -> None:
    page = ("Hakkımızda | Ege Zeytin Ürünleri A.Ş. 1994'te Ayvalık'ta kuruldu; bugün 9 ülkeye sızma zeytinyağı "
            "ihraç ediyor. Fabrikamız: Sahil Mah. Liman Yolu No:18 Ayvalık/Balıkesir. Vergi no: 8334986492.")
    assert [f.kind for f in classify(page).findings] == []


def test_a_persons_or_a_couples_account_stays_personal() -> None:
    assert ibans(f"Ayşe ile ortak hesabımız: {IBAN}, kirayı oraya yatır.") == [IBAN]
    assert ibans(f"Kirayı Mehmet Demir adına {IBAN} hesabına yatırın.") == [IBAN]
