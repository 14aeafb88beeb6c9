"""Length-preserving folding of the characters PII detectors care about.

Detectors match raw text with Unicode-aware regexes (`\\d` is every decimal digit; separator
classes include odd spaces and dashes), then fold only the short matched pieces to ASCII before
check-digit arithmetic. Folding the whole prompt up front would cost more than detection itself
on ordinary Turkish text (any typographic apostrophe would force it).

Every mapping is one character to one character, so spans in folded pieces are spans in the
original text.
"""

from __future__ import annotations

import unicodedata

# Chat messages are joined with this private-use character before detection, so a number split
# across two messages is still read as one number.
MESSAGE_JOIN = "\ue000"

SPACES = "\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"
# Zero-width characters are invisible: folded to the message-boundary character, which the
# detectors read both as "glued" and as a separator, so "10000\u200b000146" is one number.
ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff"
DASHES = "\u00ad\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d"
DOTS = "\uff0e\u066b\u066c"  # full-width full stop, Arabic decimal and thousands separators


class _FoldTable(dict[int, str]):
    """Explicit mappings, plus any Unicode decimal digit (all 660 that `\\d` matches) looked up
    on first sight: cheaper than scanning every code point at import."""

    def __missing__(self, cp: int) -> str:
        d = unicodedata.decimal(chr(cp), None)
        value = chr(cp) if d is None else str(d)
        self[cp] = value
        return value


def _build_table() -> _FoldTable:
    table = _FoldTable()
    for cp in range(0xFF01, 0xFF5F):  # full-width ASCII block → ASCII (incl. digits)
        table[cp] = chr(cp - 0xFEE0)
    for ch in SPACES:
        table[ord(ch)] = " "
    for ch in ZERO_WIDTH:
        table[ord(ch)] = MESSAGE_JOIN
    for ch in DASHES:
        table[ord(ch)] = "-"
    for ch in DOTS:
        table[ord(ch)] = "."
    return table


_TABLE = _build_table()


def fold(text: str) -> str:
    """`text` with digits, full-width ASCII, spaces, dashes and dots folded; same length.

    Meant for short matched pieces; the table only grows by characters actually seen.
    """
    return text if text.isascii() else text.translate(_TABLE)
