from __future__ import annotations

import random

from fairgate.policies.detection.checksums import iban_tr_valid, luhn_valid, tckn_valid
from tests.helpers.pii_corpus import make_card, make_iban, make_tckn


def test_tckn_known_values() -> None:
    assert tckn_valid("10000000146")  # widely published test TCKN
    assert not tckn_valid("10000000147")  # last check digit off
    assert not tckn_valid("10000000156")  # 10th digit off
    assert not tckn_valid("00000000146")  # first digit may not be 0
    assert not tckn_valid("1000000014")  # 10 digits
    assert not tckn_valid("1000000014a")


def test_iban_known_values() -> None:
    assert iban_tr_valid("330006100519786457841326")  # TR33 0006 1005 1978 6457 8413 26
    assert not iban_tr_valid("340006100519786457841326")
    assert not iban_tr_valid("33000610051978645784132")


def test_luhn_known_values() -> None:
    assert luhn_valid("4111111111111111")
    assert luhn_valid("79927398713")
    assert not luhn_valid("4111111111111112")
    assert not luhn_valid("41111111111111a1")


def test_generators_agree_with_checks() -> None:
    r = random.Random(3)
    for _ in range(300):
        assert tckn_valid(make_tckn(r)) and not tckn_valid(make_tckn(r, valid=False))
        assert iban_tr_valid(make_iban(r)) and not iban_tr_valid(make_iban(r, valid=False))
        assert luhn_valid(make_card(r)) and not luhn_valid(make_card(r, valid=False))


def test_non_ascii_digits_are_rejected_unfolded() -> None:
    # Callers fold first; the checks themselves never do arithmetic on other scripts.
    assert not tckn_valid("１0000000146")
    assert not luhn_valid("٤111111111111111")
