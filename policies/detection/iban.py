"""IBANs of countries other than Turkey (GDPR-like rules protect them too): ISO 13616 shape,
the country's fixed length, and the ISO 7064 mod-97 check. Turkish IBANs have their own path in
`digit_chains` (it also reads other scripts' digits and values split across messages)."""

from __future__ import annotations

import re
from collections.abc import Callable

from fairgate.policies.detection.textnorm import fold

# Country code → IBAN length (SWIFT IBAN registry).
IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BR": 29, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20,
    "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18,
    "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27,
    "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21,
    "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15,
    "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24, "SE": 24,
    "SI": 19, "SK": 24, "SM": 27, "TN": 24, "UA": 29, "VG": 24, "XK": 20,
}
# Starts with a plain class (its lookbehind after the first character) so sre skips ahead fast;
# anchoring on the check digits instead measured slower on digit-heavy text.
_SHAPE = re.compile(r"[A-Z](?<![A-Za-z0-9][A-Z])[A-Z][0-9]{2}(?:[ \-]?[A-Z0-9]){10,30}")
_ALNUM = re.compile(r"[A-Z0-9]")


def iban_valid(compact: str) -> bool:
    """Mod-97 check of an IBAN without separators (letters A=10 ... Z=35)."""
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def scan_foreign_ibans(text: str, emit: Callable[[int, int, bool], None],
                       hits: list[tuple[int, int]] | None = None) -> None:
    """Emit (start, end, valid) for every non-Turkish IBAN-shaped string in `text`; one with a
    bad check is still emitted (invalid) so its digits are not re-read as a card. `hits`: where
    the trigger pass saw an IBAN's start (None: scan the whole text)."""
    matches = _SHAPE.finditer(text) if hits is None else (
        m for s, _ in hits if (m := _SHAPE.match(text, s)) is not None)
    last_end = -1
    for m in matches:
        start = m.start()
        if start < last_end:
            continue
        last_end = m.end()
        country = text[start : start + 2]
        length = IBAN_LENGTHS.get(country)
        if length is None:
            continue
        chars = list(_ALNUM.finditer(text, start + 2, m.end()))
        if len(chars) < length - 2:
            continue
        end = chars[length - 3].end()
        after = text[end : end + 1]
        if after and fold(after).isalnum():
            continue  # runs on into a longer code
        emit(start, end, iban_valid(country + "".join(c.group() for c in chars[: length - 2])))
