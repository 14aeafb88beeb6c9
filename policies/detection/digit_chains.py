"""The numeric detectors: TCKN, TR IBAN, phones and payment cards, on normalised text.

Input is `textnorm.normalize`d: digits are ASCII and invisible characters are gone, so a zero
width space, LRM or soft hyphen inside a number no longer ends it. One regex finds "digit
chains": 10+ digits with at most five separator characters (spaces, tabs, newlines, . - ( ) /
, : | and message boundaries) between any two. A chain preceded by "TR" starts with an IBAN
candidate; otherwise every window of consecutive digit groups is checked by its check digits,
whatever the grouping, and by a few layout rules that keep precision:

- TCKN: whole, or groups of at most 6 digits (4-4-3, 5-6, 3-3-3-2) or one digit at a time -- so
  "2024-8177876" stays an order number -- and not an IPv4 address;
- phone: after the prefix (0, +90, 0090, or none for a 5xx mobile) the 10 digits are whole or
  grouped 3-7, 3-3-4, 3-3-2-2 or 3-4-3; a bare mobile starts with 5, not after '#';
- card: a payment network's first digit, not an ISBN-13, whole or in groups of four (the last
  shorter) or Amex/Diners 4-6-5/4-6-4, separators may be mixed;
- "+<country> ..." with 11-15 digits is a phone (foreign numbers are personal data too).

A message boundary inside a chain is ambiguous (one group split, or the next group sent), so
layouts are read both ways. Long chains (a flood of "1 1 1 ...") are prefiltered with numpy
(`digit_windows`) so only windows that pass the check digits reach Python.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from fairgate.policies.detection.checksums import iban_tr_valid, luhn_valid, tckn_valid
from fairgate.policies.detection.digit_windows import numeric_chains
from fairgate.policies.detection.textnorm import MESSAGE_JOIN

Emit = Callable[[str, int, int], None]

SEP_CHARS = " \t\n\r.-()/,:|" + MESSAGE_JOIN
_SEP = "[" + re.escape(SEP_CHARS) + "]"
_J = MESSAGE_JOIN
# What may stand between two digit groups of one number: up to five spaces, tabs, line breaks,
# . - ( ) / , : and message boundaries, or one bare '|' -- so a table's cell border " | " does
# not join the numbers of two cells.
_GAP_CHARS = "[" + re.escape(" \t\n\r.-()/,:" + MESSAGE_JOIN) + "]"
_CHAIN = re.compile(rf"[0-9](?:[0-9]|(?:{_GAP_CHARS}{{1,5}}|\|)[0-9]){{9,}}")
_GROUP = re.compile(r"[0-9]+")
_TR_BEFORE = re.compile(rf"(?<![^\W\d_])[Tt]{MESSAGE_JOIN}?[Rr]{_SEP}{{0,2}}\Z")
_CARD_FIRST = frozenset("234569")
_PHONE_AREA = frozenset("23458")  # 2-4 landlines, 5 mobiles, 8 (0850 and the like)
_PHONE_SHAPES = frozenset({(10,), (3, 7), (3, 3, 4), (3, 3, 2, 2), (3, 4, 3)})
# a phone number's key right before "90 5xx ..." written without its "+" (a log's "msisdn=",
# a JSON's "gsm": ..., "tel ")
_PHONE_KEY = re.compile(r"(?<![^\W\d_])(?:msisdn|gsm|tel|telefon|phone|mobile|cep)\w{0,3}[\"' \t:=]{1,4}\Z",
                        re.IGNORECASE)
_PYTHON_CHARS = 3000  # more chain text than this is prefiltered with numpy (measured crossover)
_PYTHON_DIGITS = 2000  # a text with more digits goes straight to numpy
MIN_CHAIN_DIGITS = 10  # fewer digits in a whole text: no chain, so no number to check


@dataclass(slots=True)
class _Chain:
    """Digit groups of one chain: group k spans text[starts[k]:ends[k]]."""

    text: str
    starts: list[int]
    ends: list[int]

    def digits(self, k: int) -> str:
        return self.text[self.starts[k] : self.ends[k]]

    def glued(self, k: int) -> bool:
        """The gap after group k is only a message boundary."""
        return self.text[self.ends[k] : self.starts[k + 1]] == MESSAGE_JOIN


def scan_numbers(text: str, blocked: list[tuple[int, int]], emit: Emit, limit: int = 64) -> None:
    """Emit (kind, start, end) for every numeric PII in normalised `text`, at most `limit`.

    `blocked`: spans already explained (e-mails, foreign IBANs); windows touching them are skipped.
    """
    found = 0
    for chain, starts in _chains(text):
        if any(bs <= chain.starts[0] and chain.ends[-1] <= be for bs, be in blocked):
            continue
        for kind, s, e in _scan_chain(chain, starts, blocked, limit - found):
            emit(kind, s, e)
            found += 1
            if found >= limit:
                return


def _chains(text: str) -> Iterator[tuple[_Chain, Iterable[int]]]:
    """Each chain with the start groups worth checking: all of them for a few short chains
    (found by regex), else those numpy's prefilter keeps (plus a first group right after '+',
    and every chain after "TR" for its IBAN check)."""
    digits = sum(map(text.count, "0123456789"))
    if digits < MIN_CHAIN_DIGITS:
        return
    spans = [m.span() for m in _CHAIN.finditer(text)] if digits <= _PYTHON_DIGITS else None
    if spans is not None and sum(e - s for s, e in spans) <= _PYTHON_CHARS:
        for start, end in spans:
            groups = [g.span() for g in _GROUP.finditer(text, start, end)]
            yield _Chain(text, [g[0] for g in groups], [g[1] for g in groups]), range(len(groups))
        return
    nc = numeric_chains(text)
    bounds = [*nc.firsts.tolist(), len(nc.starts)]
    cands = nc.candidates.tolist()
    # only chains with a candidate window, or right after "+"/"TR", get Python work
    visit = sorted({bisect.bisect_right(bounds, i) - 1 for i in cands} | set(nc.prefixed.tolist()))
    for c in visit:
        start = nc.spans[c][0]
        a, b = bounds[c], bounds[c + 1]
        lo, hi = bisect.bisect_left(cands, a), bisect.bisect_left(cands, b)
        starts = [i - a for i in cands[lo:hi]]
        if "+" in text[max(0, start - 2) : start] and (not starts or starts[0] != 0):
            starts.insert(0, 0)
        yield _Chain(text, nc.starts[a:b].tolist(), nc.ends[a:b].tolist()), starts


def _scan_chain(
    chain: _Chain, starts: Iterable[int], blocked: list[tuple[int, int]], limit: int
) -> list[tuple[str, int, int]]:
    out: list[tuple[str, int, int]] = []
    skip_to = _iban(chain, out)
    for i in starts:
        if len(out) >= limit:
            break
        if i < skip_to:
            continue
        best = _best_window(chain, i)
        if best is None:
            continue
        j, kind = best
        span = (chain.starts[i], chain.ends[j])
        if any(span[0] < be and bs < span[1] for bs, be in blocked):
            continue
        out.append((kind, *span))
        skip_to = j + 1
    return out


def _iban(chain: _Chain, out: list[tuple[str, int, int]]) -> int:
    """A chain right after "TR": its first 24 digits are an IBAN candidate. Returns the index
    of the first group not taken by it (a bad IBAN's digits are not a card or TCKN either)."""
    g0 = chain.starts[0]
    tr = _TR_BEFORE.search(chain.text, max(0, g0 - 5), g0)
    if tr is None:
        return 0
    digits = ""
    for j in range(min(24, len(chain.starts))):
        digits += chain.digits(j)
        if len(digits) == 24:
            if iban_tr_valid(digits):
                out.append(("iban", tr.start(), chain.ends[j]))
            return j + 1
        if len(digits) > 24:
            return 0
    return 0


def _best_window(chain: _Chain, i: int) -> tuple[int, str] | None:
    """The longest valid window of groups starting at group `i`: (last group, kind)."""
    best: tuple[int, str] | None = None
    text, starts, ends = chain.text, chain.starts, chain.ends
    digits = ""
    plus = "+" in text[max(0, starts[i] - 2) : starts[i]]
    for j in range(i, min(i + 19, len(starts))):
        digits += text[starts[j] : ends[j]]
        size = len(digits)
        if size > 19:
            break
        # cheap necessary conditions first: most windows fail them without a function call
        if size >= 10 and (plus or _may_be(digits, size)):
            kind = _window_kind(chain, i, j, digits)
            if kind is not None:
                best = (j, kind)
    return best


def _may_be(digits: str, size: int) -> bool:
    """A necessary condition for some kind at this size (prefix or check digits)."""
    d0 = digits[0]
    if size == 10:
        return d0 == "5"
    if size == 11:
        return d0 == "0" or tckn_valid(digits)
    if size == 12:  # only "+90 ...", which `plus` lets through, or a keyed "905..." (`_PHONE_KEY`)
        return digits.startswith("905")
    card = d0 in _CARD_FIRST and luhn_valid(digits)
    return card or (size == 14 and d0 == "0")


def _window_kind(chain: _Chain, i: int, j: int, digits: str) -> str | None:
    size, g0 = len(digits), chain.starts[i]
    before = chain.text[max(0, g0 - 2) : g0]
    if size == 10:
        ok = digits[0] == "5" and not before.endswith(("+", "#"))
        return "phone" if ok and _phone_layout(chain, i, j, 0) else None
    if size == 11:
        if tckn_valid(digits) and _layout_ok(chain, i, j, _tckn_shape) and not _ipv4(chain, i, j) \
                and not _amount(chain, i, j) and not _continues(chain, i, j):
            return "tckn"
        if digits[0] == "0" and digits[1] in _PHONE_AREA and _phone_layout(chain, i, j, 1):
            return "phone"
    keyed = digits[2] == "5" and _PHONE_KEY.search(chain.text, max(0, g0 - 16), g0) is not None
    if size == 12 and digits.startswith("90") and digits[2] in _PHONE_AREA and ("+" in before or keyed):
        if _phone_layout(chain, i, j, 2):
            return "phone"
    if size == 14 and digits.startswith("0090") and digits[4] in _PHONE_AREA:
        if _phone_layout(chain, i, j, 4):
            return "phone"
    if (
        size >= 13
        and digits[0] in _CARD_FIRST
        and not (size == 13 and digits[:3] in ("978", "979"))  # ISBN-13
        and _layout_ok(chain, i, j, _card_shape)
        and not _continues(chain, i, j)
        and luhn_valid(digits)
    ):
        return "card"
    if size <= 15 and digits[0] != "0" and before.endswith("+"):
        return "phone"  # any other country's number in international form: +<country> <number>
    return None


def _shapes(chain: _Chain, i: int, j: int) -> tuple[list[int], list[int]]:
    """Group lengths of a window read with message boundaries as separators, and glued."""
    sep = [chain.ends[k] - chain.starts[k] for k in range(i, j + 1)]
    glued = sep[:1]
    for k in range(i + 1, j + 1):
        if chain.glued(k - 1):
            glued[-1] += sep[k - i]
        else:
            glued.append(sep[k - i])
    return sep, glued


def _layout_ok(chain: _Chain, i: int, j: int, shape_ok: Callable[[list[int]], bool]) -> bool:
    return any(shape_ok(s) for s in _shapes(chain, i, j))


def _tckn_shape(shape: list[int]) -> bool:
    return len(shape) == 1 or max(shape) == 1 or (max(shape) <= 6 and min(shape) >= 2)


def _card_shape(shape: list[int]) -> bool:
    if len(shape) == 1:
        return True
    if len(shape) == 3 and shape[:2] == [4, 6] and shape[2] in (4, 5):
        return True  # Amex 4-6-5, Diners 4-6-4
    return all(n == 4 for n in shape[:-1]) and 1 <= shape[-1] <= 4


def _gap(chain: _Chain, k: int) -> str:
    """The separator text after group k."""
    return chain.text[chain.ends[k] : chain.starts[k + 1]]


def _continues(chain: _Chain, i: int, j: int) -> bool:
    """The number goes on before group i or past group j with the separator used inside the
    window: the window is part of a longer number (an order id, a bad card)."""
    if i == j:
        return False
    inner = _gap(chain, i)
    if inner == MESSAGE_JOIN:
        return False
    after = j + 1 < len(chain.starts) and _gap(chain, j) == inner
    before = i > 0 and _gap(chain, i - 1) == inner
    return after or before


_CURRENCY = re.compile(r"[ \t]?(?:TL|₺|TRY|USD|EUR|lira|\$|€)", re.IGNORECASE)


def _amount(chain: _Chain, i: int, j: int) -> bool:
    """1.234.567,89 or 319.951.307 TL: groups joined by '.' or ',' with a decimal comma or a
    currency right after (a whole number before "TL" is still read as an ID)."""
    gaps = [_gap(chain, k) for k in range(i, j)]
    if gaps and all(g in (".", ",") for g in gaps) and _CURRENCY.match(chain.text, chain.ends[j]):
        return True
    return bool(gaps) and gaps[-1] == "," and all(g == "." for g in gaps[:-1]) and \
        chain.ends[j] - chain.starts[j] == 2


def _ipv4(chain: _Chain, i: int, j: int) -> bool:
    if j - i != 3 or any(chain.text[chain.ends[k] : chain.starts[k + 1]] != "." for k in range(i, j)):
        return False
    octets = [chain.digits(k) for k in range(i, j + 1)]
    return all(int(o) <= 255 and (o == "0" or o[0] != "0") for o in octets)


def _phone_layout(chain: _Chain, i: int, j: int, prefix: int) -> bool:
    """Grouping of the 10-digit national number once the prefix's digits are set aside."""
    for shape in _shapes(chain, i, j):
        shape[0] -= prefix
        if shape[0] < 0:
            continue
        if tuple(n for n in shape if n) in _PHONE_SHAPES:
            return True
    return False
