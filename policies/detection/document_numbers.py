"""Numbers whose document format says what they are, by their shape or place, though their
digits would pass for a card or a phone: an e-invoice's number (GİB's e-Fatura and e-Arşiv: a
letter, two letters or digits, the year and a nine-digit sequence, "ABC2025000000123"; a card
starts with a digit), a trading party's GLN in an EDIFACT message (13 digits and the code list's
qualifier: "+8690001234567:14", "NAD+SU+8690001234567::9") and an HL7 message's time stamp (a
digits-only field of its MSH header: "MSH|^~\\&|...|20251204093012||ADT^A01"). `detectors`
blocks them before the number scan, as it blocks e-mails.
"""

from __future__ import annotations

import re

# (the GLN and the time stamp are read only where their format's mark stands: "UNB+", "MSH|")
_INVOICE = re.compile(r"(?<![^\W_])[A-Z][A-Z0-9]{2}20[0-9]{2}[0-9]{9}(?![0-9])")
_GLN = re.compile(r"(?<=[+:])[0-9]{13}(?=:(?:14|9)?(?::9)?(?:[+:']|$))", re.MULTILINE)
_MSH_STAMP = re.compile(r"(?:^|\n)MSH\|(?:[^|\n]*\|){4,5}((?:19|20)[0-9]{6,12})(?=[|+\-])")


def document_numbers(text: str) -> list[tuple[int, int]]:
    """(start, end) of every e-invoice number, EDIFACT GLN and HL7 header time stamp in `text`."""
    out = [m.span() for m in _INVOICE.finditer(text)] if "20" in text else []
    if "UNB+" in text or "NAD+" in text:
        out += [m.span() for m in _GLN.finditer(text)]
    if "MSH|" in text:
        out += [m.span(1) for m in _MSH_STAMP.finditer(text)]
    return out
