"""KVKK Article 6 special categories of personal data, in Turkish and English, when tied to a
person: health, religion or belief, ethnic origin, political opinion, union membership, sexual
life, criminal records, biometric and genetic data.

A category term counts only with a person nearby in the same sentence: a name from the
gazetteer, a role noun ("hastamız", "çalışanımız", "our patient"), or the first person ("ben",
"benim", "diyabetim", "I have", "my"). "HIV nasıl bulaşır?" or "What is Ramadan?" is a general
question, not personal data, and stays routable.
"""

from __future__ import annotations

import re

from fairgate.policies.addresses import person_name_spans
from fairgate.policies.special_categories_terms import TERMS, loose

SPECIAL_KINDS = tuple(TERMS)
_CATEGORY = re.compile(
    "|".join(f"(?P<{k}>(?<!\\w)(?:{'|'.join(loose(t) for t in v.split('|'))}))" for k, v in TERMS.items()),
    re.IGNORECASE,
)
_SUFFIX_1P = re.compile(r"['’]?\w{0,8}?(?:y?[ıiuü]m|y?[ıiuü]z)(?!\w)")  # diyabetim, hastasıyım, Kürdüm
_ROLE = re.compile(
    r"(?<!\w)(?:hastam[ıi]z|hastan[ıi]z|çal[ıi]şan[ıi]m[ıi]z|personelimiz|müşterimiz|öğrencimiz|üyemiz|"
    r"danışan[ıi]m[ıi]z|eşim|annem|babam|oğlum|kızım|kardeşim|arkadaşım|komşum|ben|benim|bende|"
    r"our patient|our employee|our client|my wife|my husband|my son|my daughter|my mother|my father|"
    r"the patient [A-Z]|employee [A-Z])(?!\w)",
    re.IGNORECASE,
)
_EN_1P = re.compile(r"(?<!\w)(?:I am|I'm|I have|I've been|I was|my|diagnosed)(?:[ \t]+[\w'-]+){0,2}[ \t]*\Z",
                    re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?\n](?:[ \t]|\Z)")


def find_special(text: str, hits: list[tuple[int, int]], limit: int = 16) -> list[tuple[str, int, int]]:
    """(category, start, end) for every special-category term tied to a person; `hits`: where
    the trigger pass saw a term."""
    out: list[tuple[str, int, int]] = []
    for start, _ in hits:
        m = _CATEGORY.match(text, start)
        if m is None:
            continue
        kind = m.lastgroup or "health"
        if _tied_to_person(text, m.start(), m.end()):
            out.append((kind, m.start(), m.end()))
            if len(out) >= limit:
                break
    return out


def _tied_to_person(text: str, start: int, end: int) -> bool:
    if _SUFFIX_1P.match(text, end):
        return True
    lo, hi = _sentence(text, start, end)
    if _EN_1P.search(text, max(lo, start - 40), start):
        return True
    if _ROLE.search(text, lo, hi):
        return True
    return bool(person_name_spans(text, lo, hi))


def _sentence(text: str, start: int, end: int) -> tuple[int, int]:
    """The sentence around [start, end), at most 100 characters either side."""
    lo = max(0, start - 100)
    for m in _SENTENCE_END.finditer(text, lo, start):
        lo = m.end()
    hi_m = _SENTENCE_END.search(text, end, min(len(text), end + 100))
    return lo, hi_m.start() + 1 if hi_m else min(len(text), end + 100)
