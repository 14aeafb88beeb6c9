"""Length-preserving folding of the characters PII detectors care about.

Detectors match raw text with Unicode-aware regexes (`\\d` is every decimal digit; separator
classes include odd spaces and dashes), then fold only the short matched pieces to ASCII before
check-digit arithmetic. Folding the whole prompt up front would cost more than detection itself
on ordinary Turkish text (any typographic apostrophe would force it).

Every mapping is one character to one character, so spans in folded pieces are spans in the
original text.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import numpy as np
import re2

from fairgate.policies.detection import dfa

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


# --- Whole-text normalisation (before detection) -------------------------------------------
# Invisible characters (format Cf: bidi controls, U+2061-2064, zero-width, soft hyphen; combining
# Mn: CGJ, variation selectors, accents of decomposed letters) are dropped, so one of them between
# two digit groups no longer ends a number. Compatibility digits (superscript, mathematical,
# full-width, other scripts) fold to ASCII. Spans found on the normalised text map back with
# `Normalized.to_original`.


def _class_body(cps: list[int]) -> str:
    ranges: list[list[int]] = []
    for cp in cps:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    return "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges)


def _tables() -> tuple[re.Pattern[str], dict[int, str], list[int]]:
    drop: list[int] = []
    table: dict[int, str] = {}
    for cp in range(0x80, 0x110000):
        ch = chr(cp)
        cat = unicodedata.category(ch)
        if cat in ("Cf", "Mn", "Me") and ch != MESSAGE_JOIN:
            drop.append(cp)
            continue
        value = _TABLE.get(cp)
        digit = unicodedata.digit(ch, None)
        if digit is not None and digit < 10:
            value = str(digit)
        elif cp in (0x00B7, 0x2024, 0x2027, 0x30FB):  # middle dots, one-dot leader
            value = "."
        if value is not None and value != ch and len(value) == 1:
            table[cp] = value
    return re.compile("[" + _class_body(drop) + "]+"), table, drop


_DROPPED = "\U0010ffff"  # marks a dropped character while its offsets are computed
_DROP, _NORM_TABLE, _DROP_CPS = _tables()
_DROP_AND_FOLD: dict[int, str | None] = {**_NORM_TABLE, **dict.fromkeys(_DROP_CPS)}
# Characters that need neither dropping nor folding: ASCII, Latin-1 letters and signs (not the
# soft hyphen, no-break space, superscript digits or middle dot), Latin Extended-A (Turkish
# letters), typographic quotes, the ellipsis, the lira sign and the message boundary. A text made only of these (most
# prompts) is returned as is after one fast scan.
_MARK_DROPPED = dict.fromkeys(_DROP_CPS, _DROPPED)


def _unusual_dfa() -> re2._Regexp:
    """The same class for RE2 over UTF-8 bytes: a DFA scan costs ~1 µs/KB, sre's ~8."""
    opts = re2.Options()
    opts.log_errors = False
    return re2.compile(r"[^\x00-\x7f\x{a1}-\x{ac}\x{ae}-\x{b1}\x{b4}-\x{b6}\x{b8}\x{ba}-\x{17f}"
                       r"\x{2018}-\x{201f}\x{2026}\x{20ba}\x{e000}]+", opts)


_UNUSUAL_DFA = _unusual_dfa()
_UNUSUAL = _UNUSUAL_DFA._regexp  # its program, asked only whether the class occurs


@dataclass(slots=True)
class Normalized:
    """`text` with invisible characters dropped and digits folded; `original` is what it came
    from (None when nothing was dropped, so offsets are the same)."""

    text: str
    original: str | None = None
    _keys: np.ndarray | None = None  # normalised index at which each dropped character sat

    def to_original(self, start: int, end: int) -> tuple[int, int]:
        """Map a span of the normalised text back onto the original text."""
        if self.original is None:
            return start, end
        s = start + self._shift(start)
        return (s, end + self._shift(end - 1)) if end > start else (s, s)

    def _shift(self, i: int) -> int:
        """Characters dropped before the character at normalised index `i`."""
        if self._keys is None:  # computed on the first finding only: most texts have none
            self._keys = _dropped_keys(self.original or "")
        return int(np.searchsorted(self._keys, i, side="right"))


def _dropped_keys(original: str) -> np.ndarray:
    if _DROPPED in original:  # cannot mark: the slow, exact way
        pos = [i for i, ch in enumerate(original) if _DROP.fullmatch(ch)]
        dropped = np.array(pos, dtype=np.int64)
    else:
        marked = original.translate(_MARK_DROPPED)
        arr = np.frombuffer(marked.encode("utf-32-le"), dtype="<u4")
        dropped = np.flatnonzero(arr == ord(_DROPPED))
    return dropped - np.arange(len(dropped))


def normalize(text: str) -> Normalized:
    """Drop invisible characters and fold digits (linear; ASCII text is returned as is)."""
    if text.isascii():
        return Normalized(text)
    data = text.encode("utf-8", "surrogatepass")
    if not dfa.occurs(_UNUSUAL, data):
        return Normalized(text)  # ordinary Turkish or Latin text: nothing to drop or fold
    pieces: list[str] = []
    last = 0
    for n, m in enumerate(_UNUSUAL_DFA.finditer(data)):
        if n > 64:  # many runs: one C pass over the whole text is cheaper
            out = text.translate(_DROP_AND_FOLD)
            return Normalized(out, text if len(out) != len(text) else None)
        s, e = m.span()
        pieces += (data[last:s].decode("utf-8", "surrogatepass"),
                   data[s:e].decode("utf-8", "surrogatepass").translate(_DROP_AND_FOLD))
        last = e
    pieces.append(data[last:].decode("utf-8", "surrogatepass"))
    out = "".join(pieces)
    return Normalized(out, text if len(out) != len(text) else None)
