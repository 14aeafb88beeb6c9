"""Check-digit algorithms for Turkish national IDs, Turkish IBANs and payment cards.

Each takes a string of ASCII digits (IBAN: the 24 digits after "TR") and returns a bool.
"""

from __future__ import annotations


def tckn_valid(digits: str) -> bool:
    """T.C. Kimlik No: 11 digits, first non-zero, digits 10 and 11 are check digits.

    d10 = ((d1+d3+d5+d7+d9)*7 - (d2+d4+d6+d8)) mod 10 and d11 = (d1+...+d10) mod 10.
    """
    if len(digits) != 11 or digits[0] == "0" or not digits.isdigit() or not digits.isascii():
        return False
    odd = sum(map(int, digits[0:9:2]))
    even = sum(map(int, digits[1:8:2]))
    if (odd * 7 - even) % 10 != int(digits[9]):
        return False
    return (odd + even + int(digits[9])) % 10 == int(digits[10])


def iban_tr_valid(digits24: str) -> bool:
    """ISO 13616 / ISO 7064 mod-97 check of "TR" + 24 digits (2 check digits + 22 BBAN)."""
    if len(digits24) != 24 or not digits24.isdigit() or not digits24.isascii():
        return False
    # Move "TR" + check digits to the end, letters as numbers (T=29, R=27): remainder must be 1.
    rearranged = digits24[2:] + "2927" + digits24[:2]
    return int(rearranged) % 97 == 1


# Luhn doubles every second digit from the right; a doubled digit over 9 loses 9.
_DOUBLED = str.maketrans("0123456789", "0246813579")


def luhn_valid(digits: str) -> bool:
    """Luhn (mod 10) check used by every payment card number."""
    if not digits.isdigit() or not digits.isascii():
        return False
    total = sum(map(int, digits[-1::-2])) + sum(map(int, digits[-2::-2].translate(_DOUBLED)))
    return total % 10 == 0
