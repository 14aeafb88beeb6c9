"""KVKK Article 6 special categories of personal data, in Turkish and English, when tied to a
person: health, religion or belief, ethnic origin, political opinion, union membership, sexual
life, criminal records, biometric and genetic data, appearance (religious dress) and
association membership.

A category term (a stem: `special_categories_terms`) counts only when `person_links` ties it
to a person: "HIV nasıl bulaşır?" or "What is Ramadan?" is a general question, not personal
data, and stays routable. Terms of one category in one sentence make one finding that spans
them (words right next to each other, "Kürt kökenli", stay two).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from fairgate.policies.detection.person_links import sentence, tied_to_person
from fairgate.policies.detection.special_categories_terms import TERMS, loose

SPECIAL_KINDS = tuple(TERMS)
_CATEGORY = re.compile(
    "|".join(f"(?P<{k}>(?<!\\w)(?:{'|'.join(loose(t) for t in sorted(v.split('|'), key=len, reverse=True))}))"
             for k, v in TERMS.items()),
    re.IGNORECASE,
)


def find_special(text: str, hits: list[tuple[int, int]], names: Sequence[tuple[int, int]] = (),
                 limit: int = 16) -> list[tuple[str, int, int]]:
    """(category, start, end) for every special-category term tied to a person; `hits`: where
    the trigger pass saw a term; `names`: person names the name tagger found."""
    out: list[tuple[str, int, int]] = []
    for start, _ in hits:
        m = _CATEGORY.match(text, start)
        if m is None:
            continue
        kind = m.lastgroup or "health"
        last = out[-1] if out else None
        if last is not None and last[0] == kind and m.start() - last[2] > 2 \
                and sentence(text, last[1], last[2])[1] >= m.end():
            out[-1] = (kind, last[1], m.end())  # the same category again in its sentence: one finding
            continue
        if tied_to_person(text, m.start(), m.end(), names):
            out.append((kind, m.start(), m.end()))
            if len(out) >= limit:
                break
    return out
