"""Linear-time passes that find where the context detectors need to look.

Most prompts hold no personal data, and the detectors that need context (special-category
terms, identifier context words, street markers, number words, e-mail markers, encoded runs)
would each cost a Python-regex scan of the whole text. Instead four RE2 automata (DFAs: a few
µs per KB whatever the number of alternatives) find every trigger; each detector then runs its
precise Python pattern only in a bounded window around its own triggers.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import re2

from fairgate.policies.detection import dfa
from fairgate.policies.detection.addresses_abroad import COUNTRIES, STREET_FIRST
from fairgate.policies.detection.persons.columns import COLUMN_LABELS
from fairgate.policies.detection.persons.fields import BOOKING_NAME, FIELD_LABELS
from fairgate.policies.detection.persons.machine_lines import MACHINE_LINES
from fairgate.policies.detection.special_categories_terms import term_alternation


def _capitals(pattern: str) -> str:
    """`pattern` with its "i" and "ı" also matching the Turkish capitals "İ" and "I" (RE2's case
    folding maps neither: "MÜŞTEKİ:", "CADDESİ", "SOKAĞI"), in and out of character classes."""
    return _PIECE.sub(_capital_piece, pattern)


# an escape, a character class, or a dotted or dotless i outside one
_PIECE = re.compile(r"\\.|\[(?:\\.|[^\]])*\]|[iı]")
_CAPITAL = {"i": "İ", "ı": "I"}


def _capital_piece(m: re.Match[str]) -> str:
    piece = m.group()
    if piece in _CAPITAL:
        return f"[{piece}{_CAPITAL[piece]}]"
    if piece.startswith("["):
        extra = "".join(cap for low, cap in _CAPITAL.items() if low in piece and cap not in piece)
        return piece[:-1] + extra + "]"
    return piece


_NUMBER_WORD = "sıfır|sifir|bir|iki|üç|uc|dört|dort|beş|bes|altı|alti|yedi|sekiz|dokuz|on|yirmi|otuz|kırk|kirk|" \
               "elli|altmış|altmis|yetmiş|yetmis|seksen|doksan|yüz|yuz"
_W = "(?:" + _capitals(_NUMBER_WORD) + ")"  # (Turkish capitals too: "SEKİZ", "ALTI")
_FAMILIES = {
    "special": f"(?:{term_alternation()})",
    "ident": _capitals(r"pasaport|passport|pspt?|ppt|plaka|plate|araç|aracı|aracın|aracım|doğum|dogum|do[gğ]du|do[gğ]mu[sş]|do[gğ]\.|d[üu]nyaya[ \t]+gel|"
             r"d\.[ \t]?[0-9t]|born|date[ \t_]+of[ \t_]+birth|"
             r"dob|bday|birthday|pid\||birth(?:[ \t_]?date)?|d_tarih|n[üu]fus(?:ta|umda|unda)|kimli[gğk](?:te|imde|inde)|d\.[ \t]?t\.|vkn|verg[iİı]|tax|v\.?[ \t]?no|v\.?d\b|[uzs][0-9]{8}|"
             # a Turkish plate standing alone ("34 FVK 206"; checked case-sensitively by `identifiers`)
             r"(?:0[1-9]|[1-7][0-9]|8[01]) [a-z]{2,3} [0-9]{2,4}"),
    "registry": r"sgk|ssk|sgm|ba[gğ].?kur|emekl[iİı]|bagkur|s[iİı]gorta|tahs[iİı]s|sosyal[ \t]+g[üu]venl[iİı]k|"
                r"s[iİı]c[iİı]l[ \t]+(?:numaral|no['’]?lu)",
    "postal": _capitals(r"adres|k[öo]y[üu]|mevk[iİı]|s[iİı]tes[iİı]|mahalle|blok|" + COUNTRIES) + "|" + STREET_FIRST,
    "street": _capitals(r"mahallesi|mah\.|mh\.|caddesi|cad\.|cd\.|sokağı|sokak|sok\.|sk\.|bulvarı|blv\.|bul\."),
    "words": rf"(?:{_W}[ \t,\-]+){{3,}}{_W}",
    # a local-part character, then '@' and a dotted domain (so "a@a@a@" triggers nothing)
    "email": r"[\pL\pN._%+\-\x{E000}](?:[ \t]*[@＠]|%40)[ \t]*[\pL\pN_\-\x{E000}]+\."
             r"|[\[\(\{<][ \t]?(?:at|et)[ \t]?[\]\)\}>]"
             r"|[ \t](?:at|et(?:[ \t]+i[şs]areti)?)[ \t]+[\pL\pN_\-]+(?:\.[\pL]|[ \t]+(?:dot|nokta|punto)[ \t]|[ \t]*[\[\(\{<][ \t]?(?:dot|nokta|punto|\.)"
             r"|[ \t]\.[ \t]\pL|[ \t]?[\x{2022}\x{2219}\x{22C5}][ \t]?\pL)",
    "encoded": r"[A-Za-z0-9+/_\-]{15,}=*|%[0-9a-f]{2}|&#?[0-9a-z]{1,8};",
    "iban": r"[a-z]{2}[0-9]{2}[ \-]?[a-z0-9]",  # a foreign IBAN's start (checked by `iban`)
    # a person field's label, or a booking's passenger (checked by `persons.fields`)
    "field": rf"(?:^|[^\pL\pN_]){_capitals(FIELD_LABELS)}|{BOOKING_NAME}",
    "column": _capitals(COLUMN_LABELS),  # a name column in a table's header (read by `persons.columns`)
    "machine": MACHINE_LINES,  # an HL7 name field or an MRZ name line (read by `persons.machine_lines`)
}
FAMILIES = tuple(_FAMILIES)


def _compile(families: tuple[str, ...]) -> Any:
    """The families' alternation without capture groups (RE2 then answers from its DFA; with a
    group per family it ran its NFA over every match to say which group matched)."""
    opts = re2.Options()
    opts.case_sensitive = False
    opts.log_errors = False
    opts.max_mem = 64 << 20
    return re2.compile("|".join(f"(?:{_FAMILIES[k]})" for k in families), opts)._regexp


Pass = tuple[Any, tuple[tuple[str, Any], ...]]  # (the families' union, each family alone)


def _pass(families: tuple[str, ...]) -> Pass:
    return _compile(families), tuple((k, _compile((k,))) for k in families)


# Four passes: an encoded run ("mehmet_arslan+ik...") may overlap an e-mail marker or a word,
# and one pass reports only non-overlapping matches; so may a special-category term ending the
# local part ("yesimaksakal@": "sakal"), so e-mail markers go with the field labels.
_PASSES = tuple(_pass(fams) for fams in (
    ("special", "ident", "street", "words", "registry", "postal", "column"), ("encoded",), ("iban",), ("field", "email", "machine")))
# the last three passes' families in one automaton, asked only whether any occurs: most prompts
# (three in four realistic rows) hold no encoded run, IBAN start, field label or e-mail marker,
# and one search then answers for three
_LATER = _compile(tuple(k for _, each in _PASSES[1:] for k, _ in each))
_UNANCHORED, _AT_START = dfa.UNANCHORED, dfa.AT_START


def _matches(union: Any, each: tuple[tuple[str, Any], ...], data: bytes, pos: int = 0) -> Iterator[tuple[str, int, int]]:
    """Non-overlapping matches (family, start, end) in byte offsets from `pos` (no match may
    start before it), straight from RE2 (the
    wrapper's `finditer` builds a match object and an offsets table per hit, several µs each).
    A match's family is the first whose pattern matches at its start: the one the alternation
    chose (leftmost-first), so the same answer a group per family gave."""
    end = len(data)
    while pos <= end:
        s, e = union.Match(_UNANCHORED, data, pos, end)[0]
        if s == -1:
            return
        if len(each) == 1:
            yield each[0][0], s, e
        else:
            yield next(k for k, rx in each if rx.Match(_AT_START, data, s, end)[0][0] != -1), s, e
        pos = e if e > s else e + 1


Hits = dict[str, list[tuple[int, int]]]


def find_triggers(text: str, limit: int = 4096) -> tuple[Hits, bool]:
    """(family → (start, end) of its triggers, overflow). More than `limit` triggers is not
    ordinary prose and would cost the detectors too much: `overflow` is then True and the
    caller must treat the text as sensitive (fail closed) instead of scanning on."""
    hits: Hits = {k: [] for k in _FAMILIES}
    data = text.encode("utf-8", "surrogatepass")  # matched as bytes: the str path costs 3x
    # (no pass of all families at once first: with the field labels its DFA had more states than
    # RE2's cache holds, rebuilt on every call on varied text, 250 µs a row; without them it saved
    # nothing on realistic rows, 89% of which hold a trigger, and cost a fifth automaton's cache misses)
    found: list[tuple[str, int, int]] = []
    for union, each in _PASSES if dfa.occurs(_LATER, data) else _PASSES[:1]:
        for match in _matches(union, each, data):
            if len(found) >= limit:
                return hits, True
            found.append(match)
    to_char = _char_offsets(data, found) if len(data) != len(text) else None
    for family, s, e in found:
        hits[family].append((s, e) if to_char is None else (to_char[s], to_char[e]))
    for spans in hits.values():
        spans.sort()
    return hits, False


def _char_offsets(data: bytes, found: list[tuple[str, int, int]]) -> dict[int, int]:
    """Byte offset → character offset for every offset in `found`, in one pass over `data`."""
    out: dict[int, int] = {0: 0}
    last = chars = 0
    for off in sorted({o for _, s, e in found for o in (s, e)}):
        chars += len(data[last:off].decode("utf-8", "surrogatepass"))
        out[off] = chars
        last = off
    return out
