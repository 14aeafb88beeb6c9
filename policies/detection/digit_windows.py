"""Vectorised prefilter for many or long digit chains (a pasted table, a flood of "1 1 1 ...").

`digit_chains` checks every window of consecutive digit groups in Python, which is fine for
the short chains of real text but costs seconds on a 1 MB run of digits and separators. Here
numpy computes, for every start group at once, which windows of 10-19 digits could be a TCKN,
phone or card (check digits, prefixes, the layout rules on group lengths) and returns only
those starts; `digit_chains` then runs its exact check on them. The filter is a superset of the
exact rules (when in doubt it keeps a start), so both paths find the same values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fairgate.policies.detection.textnorm import MESSAGE_JOIN

_DOUBLED = np.array([0, 2, 4, 6, 8, 1, 3, 5, 7, 9], dtype=np.int32)
_CARD_FIRST = np.array([d in (2, 3, 4, 5, 6, 9) for d in range(10)])
_PHONE_AREA = np.array([d in (2, 3, 4, 5, 8) for d in range(10)])


_TABLE_MAX = 0xFFFF  # code points above it are never gap characters
_IS_GAP = np.zeros(_TABLE_MAX + 1, dtype=bool)
_IS_GAP[[ord(c) for c in " \t\n\r.-()/,:" + MESSAGE_JOIN]] = True
_PIPE = ord("|")
_R_CODES = np.array([ord("R"), ord("r")], dtype="<u4")  # "TR33 ...": an IBAN to check
_T_CODES = np.array([ord("T"), ord("t")], dtype="<u4")


@dataclass(slots=True)
class NumericChains:
    """Every digit chain of a text, as arrays: group k spans [starts[k], ends[k]); chain c's
    groups are firsts[c] .. firsts[c+1]-1; `candidates`: sorted groups worth an exact look."""

    spans: list[tuple[int, int]]
    starts: np.ndarray
    ends: np.ndarray
    firsts: np.ndarray
    candidates: np.ndarray
    prefixed: np.ndarray  # chains right after '+' or "TR" (phone prefix, IBAN)


def numeric_chains(text: str) -> NumericChains:
    """The chains `digit_chains._CHAIN` finds (digit groups joined by 1-5 gap characters or one
    bare '|', 10+ digits), found with array operations, and their candidate start groups."""
    arr = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")
    isd = (arr >= 48) & (arr <= 57)
    edge = np.diff(isd.view(np.int8), prepend=np.int8(0), append=np.int8(0))
    gs = np.flatnonzero(edge == 1)
    ge = np.flatnonzero(edge == -1)
    if len(gs) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return NumericChains([], empty, empty, empty, empty, empty)
    gap_s, gap_e = ge[:-1], gs[1:]
    glen = gap_e - gap_s
    joined = _short_gaps(arr, gap_s, glen) | ((glen == 1) & (arr[gap_s] == _PIPE))
    chain_id = np.concatenate(([0], np.cumsum(~joined)))
    lens = ge - gs
    keep = (np.bincount(chain_id, weights=lens) >= 10)[chain_id]
    gs, ge, chain_id, lens = gs[keep], ge[keep], chain_id[keep], lens[keep]
    if len(gs) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return NumericChains([], empty, empty, empty, empty, empty)
    digits = _group_digits(arr, gs, lens)
    hard = np.zeros(len(gs), dtype=bool)  # hard[k]: group k+1 starts another chain
    hard[:-1] = chain_id[1:] != chain_id[:-1]
    firsts = np.flatnonzero(np.concatenate(([True], hard[:-1])))
    lasts = np.concatenate((firsts[1:] - 1, [len(gs) - 1]))
    mj = (gs[1:] - ge[:-1] == 1) & ~hard[:-1] & (arr[ge[:-1]] == ord(MESSAGE_JOIN))
    cands = _candidates(lens, digits, layout=not bool(np.any(mj)), hard=hard)
    spans = list(zip(gs[firsts].tolist(), ge[lasts].tolist(), strict=True))
    before = arr[np.maximum(gs[firsts][:, None] - np.arange(1, 7)[None, :], 0)]  # [chains, 6], nearest first
    plus = (before[:, :2] == ord("+")).any(axis=1)
    tr = (np.isin(before[:, :-1], _R_CODES) & np.isin(before[:, 1:], _T_CODES)).any(axis=1)
    prefixed = np.flatnonzero((plus | tr) & (gs[firsts] > 0))
    return NumericChains(spans, gs, ge, firsts, cands, prefixed)


def _short_gaps(arr: np.ndarray, gap_s: np.ndarray, glen: np.ndarray) -> np.ndarray:
    """Which gaps (starting at `gap_s`, `glen` long) are 1-5 gap characters. Character o is read
    only for the gaps still joining that have one (a run of "1 1 1": one pass, not five)."""
    in_gap = glen <= 5
    for o in range(5):
        rows = np.flatnonzero(in_gap & (glen > o))
        if not len(rows):
            break
        in_gap[rows] = _IS_GAP[np.minimum(arr[gap_s[rows] + o], _TABLE_MAX)]
    return in_gap


def _group_digits(arr: np.ndarray, gs: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """The digits of the kept groups, concatenated (cost: the digits, not the whole text)."""
    before = np.zeros(len(lens), dtype=np.int64)
    before[1:] = np.cumsum(lens)[:-1]
    idx = np.arange(int(lens.sum())) + np.repeat(gs - before, lens)
    return (arr[idx] - 48).astype(np.int32)


def _candidates(lens: np.ndarray, digits: np.ndarray, layout: bool, hard: np.ndarray) -> np.ndarray:
    """Start groups i such that some window of groups i..j-1 holding 10-19 digits passes the
    check digits, prefixes and (when `layout`) the layout rules. Each kind first keeps the
    starts whose first group and digits allow it at all, then checks its window sizes there;
    layout rules are O(1) per window with prefix sums."""
    w = _Windows(lens, digits, hard)
    first = digits[np.minimum(w.offs[:-1, None] + np.arange(5)[None, :], len(digits) - 1)]  # [g, 5]
    found = [_tckn_starts(w, first, layout), _phone_starts(w, first, layout), _card_starts(w, first, layout)]
    return np.unique(np.concatenate(found))


class _Windows:
    """Digit offsets of the groups and where a window of n digits from a start group ends."""

    __slots__ = ("lens", "digits", "offs", "count", "_sums")

    def __init__(self, lens: np.ndarray, digits: np.ndarray, hard: np.ndarray) -> None:
        self.lens, self.digits = lens, digits
        self.offs = np.zeros(len(lens) + 1, dtype=np.int64)
        self.offs[1:] = np.cumsum(lens)
        self.count = _PrefixCounts(lens, hard)
        self._sums: tuple[np.ndarray, np.ndarray] | None = None

    def parity_sums(self) -> tuple[np.ndarray, np.ndarray]:
        """[2, digits + 1] prefix sums of the digits at even / odd positions (row 0 / 1), as they
        are and doubled: a window's Luhn sum in O(1), computed once for all card lengths."""
        if self._sums is None:
            par = np.arange(len(self.digits)) % 2
            plain, doubled = self.digits, _DOUBLED[self.digits]
            self._sums = (np.stack([_prefix(np.where(par == p, plain, 0)) for p in (0, 1)]),
                          np.stack([_prefix(np.where(par == p, doubled, 0)) for p in (0, 1)]))
        return self._sums

    def end(self, rows: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows whose n-digit window ends on a group boundary within one chain, the group
        after each such window)."""
        g = len(self.lens)
        ends = self.offs[rows] + n
        j = np.minimum(np.searchsorted(self.offs, ends), g)
        ok = (self.offs[j] == ends) & (self.count.hard[np.maximum(j - 1, 0)] - self.count.hard[rows] == 0)
        return rows[ok], j[ok]


def _tckn_starts(w: _Windows, first: np.ndarray, layout: bool) -> np.ndarray:
    shape = ((w.lens <= 6) | (w.lens == 11)) if layout else True
    i, j = w.end(np.flatnonzero((first[:, 0] != 0) & shape), 11)
    if layout and len(i):
        c = w.count
        i = i[(j - i == 1) | c.none(c.not1, i, j) | c.none(c.bad_tckn, i, j)]
    return i[_tckn(w.digits, w.offs[i])] if len(i) else i


def _phone_starts(w: _Windows, first: np.ndarray, layout: bool) -> np.ndarray:
    prefixes = {
        10: first[:, 0] == 5,  # a bare 5xx mobile
        11: (first[:, 0] == 0) & _PHONE_AREA[first[:, 1]],  # 0 + area
        12: (first[:, 0] == 9) & (first[:, 1] == 0) & (first[:, 2] == 5),  # 905 (`_PHONE_KEY` decides)
        14: (first[:, 0] == 0) & (first[:, 1] == 0) & (first[:, 2] == 9) & _PHONE_AREA[first[:, 4]],  # 0090
    }
    out: list[np.ndarray] = []
    for n, prefix in prefixes.items():
        i, j = w.end(np.flatnonzero(prefix), n)
        if layout and len(i):
            c = w.count
            i = i[(j - i == 1) | ((j - i <= 5) & (c.short[j] - c.short[np.minimum(i + 1, j)] == 0))]
        out.append(i)
    return np.concatenate(out)


def _card_starts(w: _Windows, first: np.ndarray, layout: bool) -> np.ndarray:
    lens = w.lens
    shape = ((lens == 4) | (lens >= 13)) if layout else True
    rows = np.flatnonzero(_CARD_FIRST[first[:, 0]] & shape)
    out: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
    for n in range(13, 20):
        i, j = w.end(rows, n)
        if layout and len(i):
            c = w.count
            last = lens[j - 1]
            fours = (c.not4[np.maximum(j - 1, i)] - c.not4[i] == 0) & (last <= 4)
            amex = (j - i == 3) & (lens[i] == 4) & (lens[np.minimum(i + 1, len(lens) - 1)] == 6) \
                & (last >= 4) & (last <= 5)
            i = i[(j - i == 1) | fours | amex]
        if len(i):
            s = w.offs[i]
            out.append(i[_luhn(w, s, s + n)])
    return np.concatenate(out)


class _PrefixCounts:
    """Prefix sums of per-group flags, so "no group in i..j-1 has flag X" is O(1) per window."""

    def __init__(self, lens: np.ndarray, hard: np.ndarray) -> None:
        self.hard = self._prefix(hard)
        self.not1 = self._prefix(lens != 1)
        self.bad_tckn = self._prefix((lens < 2) | (lens > 6))
        self.short = self._prefix(lens < 2)
        self.not4 = self._prefix(lens != 4)

    @staticmethod
    def _prefix(flags: np.ndarray) -> np.ndarray:
        return _prefix(flags)

    @staticmethod
    def none(prefix: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """No flagged group among groups lo..hi-1."""
        out: np.ndarray = prefix[hi] - prefix[lo] == 0
        return out


def _prefix(values: np.ndarray) -> np.ndarray:
    out = np.zeros(len(values) + 1, dtype=np.int64)
    out[1:] = np.cumsum(values)
    return out


def _tckn(digits: np.ndarray, s: np.ndarray) -> np.ndarray:
    """TCKN check digits of the 11 digits from each of `s`: d10 = (7 * (d1+d3+d5+d7+d9) -
    (d2+d4+d6+d8)) mod 10, d11 = (d1+...+d10) mod 10; one gather per digit position (an
    [m, 11] index array cost more than the arithmetic)."""
    w = [digits[s + k] for k in range(11)]
    odd = w[0] + w[2] + w[4] + w[6] + w[8]
    even = w[1] + w[3] + w[5] + w[7]
    out: np.ndarray = (w[0] != 0) & ((odd * 7 - even) % 10 == w[9]) & ((odd + even + w[9]) % 10 == w[10])
    return out


def _luhn(w: _Windows, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Luhn check of digits[s:e] for every pair, with parity prefix sums (no per-window loop)."""
    plain, dbl = w.parity_sums()
    last = (e - 1) % 2  # the last digit is taken as is, the one before it doubled, ...
    total = plain[last, e] - plain[last, s] + dbl[1 - last, e] - dbl[1 - last, s]
    out: np.ndarray = total % 10 == 0
    return out
