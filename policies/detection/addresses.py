"""Names with addresses: a Turkish postal address (Mah./Mahallesi, Cad./Caddesi, Sok./Sokak,
Bulvarı, No:, D:, Kat, a province or district) tied to a person -- a given name and surname
from the gazetteer just before it, or the first person ("adresim", "oturuyorum", "I live").

An address alone (a shop, a public building) and a name alone (a public figure in general
text) are not flagged; neither is a street named after a person ("Atatürk Cad.").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from fairgate.policies.detection.gazetteer import fold_key, is_person_name, places

_UP = "A-ZÇĞİÖŞÜ"
_LO = "a-zçğıöşüâî"
NAME = re.compile(rf"[{_UP}][{_LO}]+(?:[ \t]+[{_UP}][{_LO}]+){{1,2}}")
STREET = re.compile(
    r"(?<![\w])(?:Mahallesi|Mah\.|Mh\.|Caddesi|Cad\.|Cd\.|Sokağı|Sokak|Sok\.|Sk\.|Bulvarı|Blv\.|Bul\."
    # and in a line of capitals ("AKTEPE MAH. 2071. CAD. NO:19")
    r"|MAHALLESİ|MAH\.|MH\.|CADDESİ|CAD\.|CD\.|SOKAĞI|SOKAK|SOK\.|SK\.|BULVARI|BLV\.|BUL\.)",
)
_NUMBER = re.compile(r"(?:No|Numara|D|Daire|Kat)[ \t]*[:.]?[ \t]*[0-9]{1,5}|(?<!\w)Kat(?!\w)", re.IGNORECASE)
_WORD = re.compile(rf"[{_UP}](?:[{_LO}]+|[{_UP}]+)")  # ("Keçiören", "KEÇİÖREN")
_TOKEN = re.compile(r"\S+")
_FIRST_PERSON = re.compile(
    r"(?:adres(?:im|imiz)|ev(?:im|imiz)|oturuyorum|ikamet ediyorum|yaşıyorum|my address|"
    r"I live|my home)", re.IGNORECASE,
)

# a form's or a fixture's made-up address ("Örnek Mah. Deneme Sok. No:1", "TEST CAD. NO 1"): no one's
PLACEHOLDER = re.compile(r"(?<!\w)(?:[öo]rnek|deneme|test|sample|example|dummy)(?!\w)", re.IGNORECASE)
# a workplace's address, not a home's ("İş adresi: ...", "... ZEMİN KAT DÜKKAN", "atölyesi")
WORKPLACE = re.compile(r"(?<!\w)(?:d[üu]kkan|at[öo]lye|i[şs][ \t]*(?:yeri[ \t]+)?adres)", re.IGNORECASE)


def person_name_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Spans of personal names (gazetteer) in text[start:end], minus street names."""
    out: list[tuple[int, int]] = []
    for m in NAME.finditer(text, start, len(text) if end is None else end):
        words = list(_TOKEN.finditer(m.group()))
        first = 0
        while first < len(words) - 1:
            span = _name_at(text, m.start(), words, first)
            if span is None:
                first += 1
                continue
            out.append(span[:2])
            first = span[2]
    return out


def _name_at(text: str, base: int, words: list[re.Match[str]], first: int) -> tuple[int, int, int] | None:
    """The longest name starting at word `first` (not a street's name): (start, end, next word)."""
    for k in range(min(len(words), first + 3), first + 1, -1):
        if is_person_name([w.group() for w in words[first:k]]):
            end = base + words[k - 1].end()
            if STREET.match(text, _skip_space(text, end)):
                return None
            return base + words[first].start(), end, k
    return None


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t,":
        i += 1
    return i


def find_person_addresses(text: str, hits: list[tuple[int, int]], tagged: Sequence[tuple[int, int]] = (),
                          limit: int = 16) -> list[tuple[str, int, int]]:
    """("person_address", start, end) for every address tied to a person; `hits`: where the
    trigger pass saw a street marker; `tagged`: names the name tagger found."""
    out: list[tuple[str, int, int]] = []
    for start, _ in hits:
        m = STREET.match(text, start)
        if m is None:
            continue
        end = _address_end(text, m.end())
        if end is None or PLACEHOLDER.search(text, max(0, m.start() - 30), end) \
                or WORKPLACE.search(text, max(text.rfind("\n", 0, m.start()) + 1, m.start() - 60), min(len(text), end + 20)):
            continue
        lo = max(0, m.start() - 100)
        names = sorted(person_name_spans(text, lo, m.start()) + [n for n in tagged if lo <= n[0] < m.start()])
        if names:
            out.append(("person_address", names[-1][0], end))
        elif _FIRST_PERSON.search(text, lo, m.start()):
            out.append(("person_address", m.start(), end))
        if len(out) >= limit:
            break
    return out


def _address_end(text: str, after: int) -> int | None:
    """End of the address's number / district / province part, when it has one."""
    window_end = min(len(text), after + 80)
    end = None
    for n in _NUMBER.finditer(text, after, window_end):
        end = n.end()
    for w in _WORD.finditer(text, after, window_end):
        if fold_key(w.group()) in places():
            end = max(end or 0, w.end())
    return end
