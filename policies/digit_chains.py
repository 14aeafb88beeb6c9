"""The numeric detectors: TCKN, TR IBAN, phones and payment cards, on raw text.

A C-speed regex finds candidates: runs of 11+ characters of digits (any script) and separators
(spaces, dots, dashes, parentheses, message boundaries). Prose, dates, amounts and short numbers
never match, so Python code only looks at candidates. Inside one, "digit chains" hold 11+
digits with at most three separator characters between any two. A chain preceded by "TR" is an
IBAN candidate; any other chain is split into digit groups (folded to ASCII) and every window of
consecutive groups is checked by length, layout and check digits. Bare 10-digit mobiles
(5xx xxx xx xx) have their own narrow regex, run only inside candidates.

Layout rules trade a little recall for precision and are deliberate:
- TCKN: written whole or in groups of 2-3 digits (so "2024-8177876" is an order number);
- phone: after the prefix (0, +90, 0090) the 10 digits are whole or grouped 3-7, 3-3-4,
  3-3-2-2 or 3-4-3;
- card: first digit of a payment network (2-6, 9), not an ISBN-13, and one run or groups of
  3-6 digits joined by one kind of separator (so date ranges and numbered lists that happen to
  pass Luhn are not cards);
- any number written "+<country> ..." with 11-15 digits is a phone (foreign numbers are
  personal data too);
- an IBAN-shaped string with a bad check is not re-read as a card or TCKN.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

from policies.checksums import iban_tr_valid, luhn_valid, tckn_valid
from policies.textnorm import DASHES, DOTS, MESSAGE_JOIN, SPACES, ZERO_WIDTH, fold

Emit = Callable[[str, int, int], None]
Group = tuple[int, int, str]  # start, end, ASCII digits


def _digit_ranges() -> str:
    """Body of a regex class of every decimal digit in the BMP, as ranges (sre compiles it to a
    bitmap; plain `\\d` is ~2x slower per character). Astral digits (math bold etc.) are not
    covered."""
    cps = [cp for cp in range(0x10000) if unicodedata.decimal(chr(cp), None) is not None]
    ranges: list[list[int]] = []
    for cp in cps:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    return "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges)


_D = "[" + _digit_ranges() + "]"
_SEP_CHARS = re.escape(" .-()\t" + MESSAGE_JOIN + SPACES + ZERO_WIDTH + DASHES + DOTS)
_SEP = "[" + _SEP_CHARS + "]"
# Regexes start with a plain character class, any lookbehind after the first character, so sre
# skips ahead at C speed; a leading lookbehind makes it try every position (~5x slower).
# Candidate: a run of digits and separators of 11+ characters. One fast single-class repeat;
# only candidates get the precise (slower, backtracking) regexes below.
_CANDIDATE = re.compile(rf"{_D}(?<!{_D}{{2}})[{_digit_ranges()}{_SEP_CHARS}]{{9,}}{_D}")
# Digit chain: 11+ digits, at most 3 separator characters between any two.
_CHAIN = re.compile(rf"{_D}(?<!{_D}{{2}})(?:{_SEP}{{0,3}}{_D}){{10,}}")
_GROUP = re.compile(r"[0-9]+")  # on folded chains
_R = frozenset("Rr\uff32\uff52")  # an IBAN's "R" sits in the 4 characters before its digits
_TR_BEFORE = re.compile(
    rf"(?<![^\W\d_])[Tt\uff34\uff54]{MESSAGE_JOIN}?[Rr\uff32\uff52]{_SEP}{{0,2}}\Z"
)
_IBAN_BODY = re.compile(rf"{_D}(?:{_SEP}{{0,2}}{_D}){{23}}(?!{_D})")
# 5xx xxx xx xx / 5xx xxx xxxx; a message boundary may also split a group ("560 60" | "2 75 29").
_DG = f"(?:{MESSAGE_JOIN}?{_D})"  # a digit that continues a group
_BARE_MOBILE = re.compile(
    rf"{_D}(?<![\d+\uff0b].){_DG}{{2}}{_SEP}{{1,2}}{_D}{_DG}{{2}}{_SEP}{{1,2}}"
    rf"(?:{_D}{_DG}{_SEP}{{1,2}}{_D}{_DG}|{_D}{_DG}{{3}})(?!{_D})"
)
# Payment networks: 2 (Mastercard 2-series, Mir), 3 (Amex, JCB, Diners), 4 (Visa), 5 (Mastercard,
# Maestro), 6 (Discover, UnionPay, Maestro), 9 (Troy). Leaving out 1/7/8 keeps millisecond
# timestamps and trace ids that happen to pass Luhn from reading as cards.
_CARD_FIRST = frozenset("234569")
_PHONE_AREA = frozenset("23458")  # 2-4 landlines, 5 mobiles, 8 (0850 and the like)
_PHONE_SHAPES = frozenset({(10,), (3, 7), (3, 3, 4), (3, 3, 2, 2), (3, 4, 3)})


def scan_numbers(text: str, blocked: list[tuple[int, int]], emit: Emit) -> None:
    """Emit (kind, start, end) for every numeric PII in raw `text`.

    `blocked`: sorted spans already explained (e-mails); chains inside them are skipped.
    """
    k = 0
    found: list[tuple[int, int]] = []
    mobiles: list[tuple[int, int]] = []
    for cand in _CANDIDATE.finditer(text):
        cs, ce = cand.span()
        piece = cand.group()
        # One contiguous run (most IDs and cards) is its own chain and cannot be a bare mobile.
        whole = piece.isdigit()
        chains = ((cs, ce, piece),) if whole else ((*m.span(), m.group()) for m in _CHAIN.finditer(text, cs, ce))
        for start, end, chain_text in chains:
            near: list[tuple[int, int]] = []
            if blocked:
                # Chains come in text order: walk the blocked spans alongside, keeping those
                # that overlap this chain (usually none), so each chain costs O(1) here.
                while k < len(blocked) and blocked[k][1] <= start:
                    k += 1
                near = [b for b in blocked[k : k + 8] if b[0] < end]
                if near and near[0][0] <= start and near[0][1] >= end:
                    continue
            if not _iban(text, start, end, near, emit, found):
                _scan_chain(text, start, fold(chain_text), near, emit, found)
        if not whole and ("5" in piece or not piece.isascii()):
            mobiles.extend(m.span() for m in _BARE_MOBILE.finditer(text, cs, ce))
    for span in mobiles:
        if fold(text[span[0]]) == "5" and not _overlaps(span, found) and not _overlaps(span, blocked):
            emit("phone", span[0], span[1])


def _iban(
    text: str, start: int, end: int, near: list[tuple[int, int]], emit: Emit,
    found: list[tuple[int, int]],
) -> bool:
    """Handle a chain preceded by "TR"; True when the whole chain was the IBAN's digits."""
    if _R.isdisjoint(text[max(0, start - 4) : start]):
        return False
    tr = _TR_BEFORE.search(text, max(0, start - 5), start)
    body = _IBAN_BODY.match(text, start) if tr is not None else None
    if tr is None or body is None:
        return False
    if iban_tr_valid(re.sub(r"[^0-9]", "", fold(body.group()))):
        emit("iban", tr.start(), body.end())
        found.append((tr.start(), body.end()))
    near.append(body.span())  # a bad IBAN is still not a card or TCKN
    return body.end() >= end


def _overlaps(span: tuple[int, int], spans: list[tuple[int, int]]) -> bool:
    s, e = span
    return any(s < be and bs < e for bs, be in spans)


def _scan_chain(
    text: str, offset: int, chain: str, blocked: list[tuple[int, int]], emit: Emit,
    found: list[tuple[int, int]],
) -> None:
    """A chat-message boundary inside a chain is ambiguous (one group split, or the next group
    sent), so such a chain is read both ways: boundary as separator, and boundary glued."""
    if chain.isdigit():  # the common case: one contiguous number
        kind = _window_kind(text, [(offset, offset + len(chain), chain)], 0, 0, chain)
        if kind is not None:
            emit(kind, offset, offset + len(chain))
            found.append((offset, offset + len(chain)))
        return
    groups = [(m.start() + offset, m.end() + offset, m.group()) for m in _GROUP.finditer(chain)]
    mine: list[tuple[tuple[int, int], str]] = []
    _scan_groups(text, groups, blocked, mine)
    if MESSAGE_JOIN in chain:
        glued: list[Group] = []
        for g in groups:
            if glued and fold(text[glued[-1][1] : g[0]]) == MESSAGE_JOIN:
                glued[-1] = (glued[-1][0], g[1], glued[-1][2] + g[2])
            else:
                glued.append(g)
        _scan_groups(text, glued, blocked, mine)
        # Both readings found something: keep the longest findings that do not overlap.
        kept: list[tuple[tuple[int, int], str]] = []
        for span, kind in sorted(mine, key=lambda f: f[0][0] - f[0][1]):
            if not _overlaps(span, [k for k, _ in kept]):
                kept.append((span, kind))
        mine = kept
    for span, kind in mine:
        emit(kind, span[0], span[1])
        found.append(span)


def _scan_groups(
    text: str, groups: list[Group], blocked: list[tuple[int, int]], out: list[tuple[tuple[int, int], str]]
) -> None:
    """Every window of consecutive groups; the longest valid window starting at each group
    wins, and the scan continues after it."""
    n = len(groups)
    i = 0
    while i < n:
        best: tuple[int, str] | None = None
        digits = ""
        for j in range(i, n):
            digits += groups[j][2]
            if len(digits) > 19:
                break
            if len(digits) >= 11:
                kind = _window_kind(text, groups, i, j, digits)
                if kind is not None:
                    best = (j, kind)
        if best is not None:
            span = (groups[i][0], groups[best[0]][1])
            if not _overlaps(span, blocked):
                out.append((span, best[1]))
                i = best[0] + 1
                continue
        i += 1


def _window_kind(text: str, groups: list[Group], i: int, j: int, digits: str) -> str | None:
    size = len(digits)
    if size == 11:
        if tckn_valid(digits) and (i == j or _tckn_layout(text, groups, i, j)):
            return "tckn"
        if digits[0] == "0" and digits[1] in _PHONE_AREA and _phone_layout(groups, i, j, 1):
            return "phone"
    if size == 12 and digits[0] == "9" and digits[1] == "0" and digits[2] in _PHONE_AREA:
        if "+" in fold(text[max(0, groups[i][0] - 2) : groups[i][0]]) and _phone_layout(groups, i, j, 2):
            return "phone"
    if size == 14 and digits.startswith("0090") and digits[4] in _PHONE_AREA:
        if _phone_layout(groups, i, j, 4):
            return "phone"
    if (
        size >= 13
        and digits[0] in _CARD_FIRST
        and not (size == 13 and digits[:3] in ("978", "979"))  # ISBN-13
        and _card_layout(text, groups, i, j)
        and luhn_valid(digits)
    ):
        return "card"
    if size <= 15 and digits[0] != "0" and groups[i][0] > 0 and fold(text[groups[i][0] - 1]) == "+":
        return "phone"  # any other country's number in international form: +<country> <number>
    return None


def _tckn_layout(text: str, groups: list[Group], i: int, j: int) -> bool:
    """Whole, or groups of 2-3 digits (123 456 789 01) -- but not an IPv4 address."""
    if not all(2 <= len(g[2]) <= 3 for g in groups[i : j + 1]):
        return False
    dotted = all(fold(text[groups[k][1] : groups[k + 1][0]]) == "." for k in range(i, j))
    return not (dotted and j - i == 3 and all(int(g[2]) <= 255 for g in groups[i : j + 1]))


def _phone_layout(groups: list[Group], i: int, j: int, prefix: int) -> bool:
    """Grouping of the 10-digit national number once the prefix's digits are set aside."""
    shape = [len(g[2]) for g in groups[i : j + 1]]
    shape[0] -= prefix
    return tuple(n for n in shape if n) in _PHONE_SHAPES


def _card_layout(text: str, groups: list[Group], i: int, j: int) -> bool:
    if i == j:
        return True
    # A gap that is only a message boundary goes with any separator.
    seps = {fold(text[groups[k][1] : groups[k + 1][0]]).replace(MESSAGE_JOIN, "") for k in range(i, j)}
    seps.discard("")
    if len(seps) > 1:
        return False
    return all(3 <= len(g[2]) <= 6 for g in groups[i:j]) and 1 <= len(groups[j][2]) <= 6
