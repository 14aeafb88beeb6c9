"""Vectorised prefilter for long digit chains (a pasted table, or a flood of "1 1 1 ...").

`digit_chains` checks every window of consecutive digit groups in Python, which is fine for
the short chains of real text but costs seconds on a 1 MB run of digits and separators. Here
numpy computes, for every start group at once, which windows of 10-19 digits could be a TCKN,
phone or card (check digits, prefixes, the layout rules on group lengths) and returns only
those starts; `digit_chains` then runs its exact check on them. The filter is a superset of the
exact rules (when in doubt it keeps a start), so both paths find the same values.
"""

from __future__ import annotations

import numpy as np

from policies.textnorm import MESSAGE_JOIN

_DOUBLED = np.array([0, 2, 4, 6, 8, 1, 3, 5, 7, 9], dtype=np.int32)
_CARD_FIRST = np.array([d in (2, 3, 4, 5, 6, 9) for d in range(10)])
_PHONE_AREA = np.array([d in (2, 3, 4, 5, 8) for d in range(10)])


def long_chain(text: str, start: int, end: int) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Digit groups of text[start:end] (absolute start and end offsets) and the sorted start
    groups whose windows may hold a value."""
    arr = np.frombuffer(text[start:end].encode("utf-32-le"), dtype="<u4")
    isd = (arr >= 48) & (arr <= 57)
    prev = np.concatenate(([False], isd[:-1]))
    nxt = np.concatenate((isd[1:], [False]))
    gs = np.flatnonzero(isd & ~prev)
    ge = np.flatnonzero(isd & ~nxt) + 1
    lens = ge - gs
    digits = (arr[isd] - 48).astype(np.int32)
    glued = bool(np.any((gs[1:] - ge[:-1] == 1) & (arr[ge[:-1]] == ord(MESSAGE_JOIN))))
    cands = _candidates(lens, digits, layout=not glued)
    keep = np.union1d(cands, np.arange(min(2, len(gs))))  # group 0 may follow "+" or "TR"
    return gs + start, ge + start, keep.tolist()


def _candidates(lens: np.ndarray, digits: np.ndarray, layout: bool) -> np.ndarray:
    g = len(lens)
    offs = np.zeros(g + 1, dtype=np.int64)
    offs[1:] = np.cumsum(lens)
    eq4 = lens == 4
    mx = lens.copy()
    mn = lens.copy()
    four = np.ones(g, dtype=bool)  # all groups but the window's last are 4 digits
    mn_rest = np.full(g, 99)  # shortest group after the first
    found: list[np.ndarray] = []
    for k in range(1, 20):
        if k > 1:
            mn_rest = mn[1:]
            mx = np.maximum(mx[:-1], lens[k - 1 :])
            mn = np.minimum(mn[:-1], lens[k - 1 :])
            four = four[:-1] & eq4[k - 2 : g - 1]
        if len(mx) == 0:
            break
        size = offs[k:] - offs[: g - k + 1]
        s = offs[: g - k + 1]
        shapes = _Shapes(k, mx, mn, four, mn_rest, lens, layout)
        for ok in (_tckn(size, s, digits, shapes), _phone(size, s, digits, shapes),
                   _card(size, s, digits, shapes)):
            found.append(np.flatnonzero(ok))
    return np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)


class _Shapes:
    """Layout facts of every window of k groups (index = start group)."""

    __slots__ = ("k", "mx", "mn", "four", "mn_rest", "lens", "layout")

    def __init__(self, k: int, mx: np.ndarray, mn: np.ndarray, four: np.ndarray,
                 mn_rest: np.ndarray, lens: np.ndarray, layout: bool) -> None:
        self.k, self.mx, self.mn, self.four = k, mx, mn, four
        self.mn_rest, self.lens, self.layout = mn_rest, lens, layout

    def tckn(self) -> np.ndarray | bool:
        if not self.layout or self.k == 1:
            return True
        return (self.mx == 1) | ((self.mx <= 6) & (self.mn >= 2))

    def phone(self) -> np.ndarray | bool:
        if not self.layout or self.k == 1:
            return True
        return (self.mn_rest >= 2) if self.k <= 5 else False

    def card(self) -> np.ndarray | bool:
        if not self.layout or self.k == 1:
            return True
        last = self.lens[self.k - 1 :]
        ok = self.four & (last <= 4)
        if self.k == 3:
            ok = ok | ((self.lens[: -2] == 4) & (self.lens[1:-1] == 6) & (last >= 4) & (last <= 5))
        return ok


def _window(digits: np.ndarray, s: np.ndarray, n: int) -> np.ndarray:
    """[len(s), n] digits of the windows starting at digit offsets `s`."""
    return digits[s[:, None] + np.arange(n)[None, :]]


def _tckn(size: np.ndarray, s: np.ndarray, digits: np.ndarray, sh: _Shapes) -> np.ndarray:
    ok = (size == 11) & sh.tckn()
    idx = np.flatnonzero(ok)
    if len(idx):
        w = _window(digits, s[idx], 11)  # [m, 11]
        odd = w[:, 0:9:2].sum(axis=1)
        even = w[:, 1:8:2].sum(axis=1)
        valid = (w[:, 0] != 0) & ((odd * 7 - even) % 10 == w[:, 9]) & ((odd + even + w[:, 9]) % 10 == w[:, 10])
        ok[idx] = valid
    return ok


def _phone(size: np.ndarray, s: np.ndarray, digits: np.ndarray, sh: _Shapes) -> np.ndarray:
    ok = ((size == 10) | (size == 11) | (size == 14)) & sh.phone()
    idx = np.flatnonzero(ok)
    if len(idx):
        w = _window(digits, s[idx], 5)  # [m, 5]: the prefix digits
        n = size[idx]
        ok[idx] = (((n == 10) & (w[:, 0] == 5))
                   | ((n == 11) & (w[:, 0] == 0) & _PHONE_AREA[w[:, 1]])
                   | ((n == 14) & (w[:, 0] == 0) & (w[:, 1] == 0) & (w[:, 2] == 9) & _PHONE_AREA[w[:, 4]]))
    return ok


def _card(size: np.ndarray, s: np.ndarray, digits: np.ndarray, sh: _Shapes) -> np.ndarray:
    ok = (size >= 13) & (size <= 19) & sh.card()
    out = np.zeros(len(size), dtype=bool)
    for n in range(13, 20):
        idx = np.flatnonzero(ok & (size == n))
        if not len(idx):
            continue
        w = _window(digits, s[idx], n)  # [m, n]
        plain = w[:, n - 1 :: -2].sum(axis=1)
        doubled = _DOUBLED[w[:, n - 2 :: -2]].sum(axis=1)
        out[idx] = ((plain + doubled) % 10 == 0) & _CARD_FIRST[w[:, 0]]
    return out
