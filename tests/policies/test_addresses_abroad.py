"""Issue 33: a person's postal address abroad (postcode, city, country; no Turkish street word),
and a firm's left alone. Addresses written for these tests."""

from __future__ import annotations

import pytest

from fairgate.policies.sensitivity import classify


def addresses(text: str) -> list[str]:
    return [text[f.start : f.end] for f in classify(text).findings if f.kind == "person_address"]


@pytest.mark.parametrize("text, part", [
    ("Alıcı: Oksana Hrytsenko, vul. Franka 12, kv. 4, 79000 Lviv, Ukraine. Kargo ücreti bende.", "79000 Lviv, Ukraine"),
    ("ALICI: SELAHATTİN KORKUT\nADRES: BAHNHOFSTRASSE 7, 3. OG, 80335 MÜNCHEN, DEUTSCHLAND", "80335 MÜNCHEN, DEUTSCHLAND"),
    ("yeni adresim: Kungsgatan 9, 111 43 Stockholm, Sverige, paketi oraya at", "111 43 Stockholm, Sverige"),
    ("Paket Hollanda'ya gidecek, alıcı:\nMerve Aksoy\nKeizersgracht 101\n1015 CJ Amsterdam, Nederland",
     "1015 CJ Amsterdam, Nederland"),
])
def test_a_persons_address_abroad(text: str, part: str) -> None:
    assert any(part in a for a in addresses(text))


@pytest.mark.parametrize("text", [
    "Tedarikçi: Müller Maschinenbau GmbH, Industriestraße 4, 70565 Stuttgart, Deutschland",
    "Fuar 2025'te 60311 Frankfurt, Deutschland adresindeki Messe'de yapılacak.",
    "Almanya ile Fransa arasındaki ticaret hacmi arttı.",
])
def test_no_persons_address_abroad(text: str) -> None:
    assert addresses(text) == []
