from __future__ import annotations

import re

import pytest

from fairgate.policies.sensitivity import classify, classify_parts, validate_tenant_patterns
from tests.helpers.pii_corpus import make_corpus
from tests.helpers.pii_quality import KINDS, score

TCKN = "10000000146"
IBAN = "TR33 0006 1005 1978 6457 8413 26"
CARD = "4111 1111 1111 1111"


def spans(text: str, **kw: object) -> list[tuple[str, str]]:
    return [(f.kind, text[f.start : f.end]) for f in classify(text, **kw).findings]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text, expected",
    [
        (f"TC kimlik no: {TCKN}.", [("tckn", TCKN)]),
        ("Kimlik 100 000 001 46 ile", [("tckn", "100 000 001 46")]),
        (f"IBAN {IBAN} olsun", [("iban", IBAN)]),
        ("iban tr330006100519786457841326.", [("iban", "tr330006100519786457841326")]),
        ("ara +90 532 123 45 67 lütfen", [("phone", "90 532 123 45 67")]),
        ("ara 0 (532) 123-45-67", [("phone", "0 (532) 123-45-67")]),
        ("tel 0212 555 12 34", [("phone", "0212 555 12 34")]),
        ("tel 0090 532 123 4567", [("phone", "0090 532 123 4567")]),
        ("cep 532 123 45 67", [("phone", "532 123 45 67")]),
        (f"kart {CARD}, skt 12/27", [("card", CARD)]),
        ("amex 3782-822463-10005", [("card", "3782-822463-10005")]),
        ("mail Ayse.Yilmaz+ik@firma.com.tr.", [("email", "Ayse.Yilmaz+ik@firma.com.tr")]),
        ("pay GB29 NWBK 6016 1331 9268 19 now", [("iban", "GB29 NWBK 6016 1331 9268 19")]),
        ("IBAN DE89370400440532013000.", [("iban", "DE89370400440532013000")]),
        ("call +1 415 555 2671 or +44 20 7946 0958", [("phone", "1 415 555 2671"), ("phone", "44 20 7946 0958")]),
    ],
)
def test_detects_each_kind_with_its_span(text: str, expected: list[tuple[str, str]]) -> None:
    assert spans(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "TC kimlik no: 10000000147",  # wrong check digit
        "IBAN TR34 0006 1005 1978 6457 8413 26",  # wrong mod-97
        "Toplantı 12.03.2024 - 15.04.2024 arası",
        "Sipariş no 2024-8177876 kargoda",
        "kart 4111 1111 1111 1112",  # Luhn fails
        "sunucu 192.168.100.200 ve 10.0.0.1",
        "tutar 1.250.000,00 TL",
        "kullanıcı @destek ve a@b",
        "numara 1234567890",  # 10 digits, no phone prefix
        "çağrı 05321234",  # too short
        "liste 1. 2. 3. 4. 5. 6. 7. 8. 9. 10. 11. 12.",
        "IBAN DE89 3704 0044 0532 0130 01",  # bad mod-97: its digits are not a card either
        "ts=1700000000123 and 1700000000000",  # ms timestamps (a card never starts with 1)
        "ISBN 978-605-123-456-7",
        "total = x + 12345678901",  # '+' with a space is arithmetic, not a phone
    ],
)
def test_hard_negatives(text: str) -> None:
    assert classify(text).findings == ()


def test_other_scripts_and_odd_separators() -> None:
    fw = "".join(chr(0xFF10 + int(c)) for c in TCKN)
    arabic = "".join(chr(0x0660 + int(c)) for c in "4111111111111111")
    assert spans(f"no {fw}") == [("tckn", fw)]
    assert spans(f"kart {arabic}") == [("card", arabic)]
    assert spans("kart 4111\u00a01111\u00a01111\u00a01111")[0][0] == "card"  # no-break spaces
    assert spans("no 10000\u200b000146")[0][0] == "tckn"  # zero-width space inside
    assert spans("tel 0532–123–45–67")[0][0] == "phone"  # en dashes
    assert spans("ＴＲ３３ ０００６ １００５ １９７８ ６４５７ ８４１３ ２６")[0][0] == "iban"
    assert spans("mail ali＠firma.com")[0][0] == "email"


def test_split_across_messages() -> None:
    parts = ["TC numaram 100000", "00146 lütfen kontrol edin"]
    c = classify_parts(parts)
    assert c.kinds == ("tckn",)
    joined = " ".join(parts)
    f = c.findings[0]
    assert joined[f.start : f.end] == "100000 00146"  # spans index the joined text
    assert classify_parts(["IBAN TR33 0006 1005 1978", "6457 8413 26"]).kinds == ("iban",)
    assert classify_parts(["kart 4111 1111", "1111 1111"]).kinds == ("card",)
    assert classify_parts(["mail ali.veli@fir", "ma.com"]).kinds == ("email",)
    assert not classify_parts(["merhaba", "dünya"]).sensitive


def test_tenant_patterns_and_keywords() -> None:
    text = "Proje KIRMIZI kapsamında PRJ-1234 ve prj-99 dosyaları"
    got = spans(text, patterns=[r"PRJ-\d{4}"], keywords=["kırmızı", "  "])
    assert got == [("keyword", "KIRMIZI"), ("pattern", "PRJ-1234")]
    assert spans("kirmizilar", keywords=["kirmizi"]) == []  # whole words only
    with pytest.raises(re.error):
        classify("x", patterns=["(unclosed"])


def test_validate_tenant_patterns() -> None:
    assert validate_tenant_patterns([r"PRJ-\d+"]) == []
    errs = validate_tenant_patterns(["(bad", "a*"])
    assert len(errs) == 2 and "invalid" in errs[0] and "empty" in errs[1]


def test_findings_never_carry_text() -> None:
    f = classify(f"no {TCKN}").findings[0]
    assert set(f.__slots__) == {"kind", "start", "end"}


def test_quality_on_generated_labelled_set() -> None:
    """Recall >= 99% and precision >= 97% overall and per kind, on a seeded corpus."""
    scores = score(make_corpus(seed=20261129, n=2500))
    report = {k: (s.labelled, round(s.recall, 4), round(s.precision, 4)) for k, s in scores.items()}
    print("detector quality (labelled, recall, precision):", report)
    for kind in (*KINDS, "all"):
        assert scores[kind].labelled > 100
        assert scores[kind].recall >= 0.99, (kind, report)
        assert scores[kind].precision >= 0.97, (kind, report)
