"""Person names in text: candidate tokens scored by the learned tagger, then joined into names.

Consecutive tokens the tagger accepts form one name when only spaces, a hyphen or an initial's
dot stand between them. A name right before an organisation or place word ("Sabiha Gökçen
Havalimanı", "Yıldız Holding", "Atatürk Caddesi") or right before a life-date parenthesis
("Mimar Sinan (1490–1588)", encyclopaedic text) is not a person's data.
"""

from __future__ import annotations

import re

from policies.persons.features import CUES, Doc, candidates
from policies.persons.lexicon import AFTER_NAME, NOT_NAMES
from policies.persons.tagger import default_tagger

THRESHOLD = 0.5
THRESHOLD_UNCASED = 0.8  # in lower-case or all-capitals lines casing gives no evidence
_CHUNK = 512  # candidates scored per numpy pass (stops early once `limit` names are found)
# ~10 µs a candidate: past this many (about 1 MB of capitalised words, not prose) the text is
# kept local unscanned rather than scanned for seconds
MAX_CANDIDATES = 40_000
_JOIN = re.compile(r"[ \t]{1,3}|[ \t]?-[ \t]?")
_LIFE_DATES = re.compile(r"[ \t]*\((?:d\.[ \t]*)?[0-9?]{3,4}")


def find_person_names(text: str, limit: int = 16) -> list[tuple[int, int]] | None:
    """(start, end) of person names in `text` (at most `limit`); None when the text has more
    candidate tokens than `MAX_CANDIDATES` and found no name in them (the caller keeps it local)."""
    doc = Doc.of(text)
    cands = candidates(doc)
    out: list[tuple[int, int]] = []
    tagger = default_tagger()
    for c in range(0, len(cands), _CHUNK):
        chunk = cands[c : c + _CHUNK]
        probs = tagger.scores(doc, chunk)
        accepted = [i for i, p in zip(chunk, probs.tolist(), strict=True)
                    if p >= (THRESHOLD if doc.mode(i) == "mixed" else THRESHOLD_UNCASED)
                    and doc.info(i).key not in NOT_NAMES]
        out += _names(doc, accepted)
        if len(out) >= limit:
            return out[:limit]
        if c + _CHUNK >= MAX_CANDIDATES:
            return out or None
    return out


def _names(doc: Doc, accepted: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    text = doc.text
    k = 0
    while k < len(accepted):
        first = last = accepted[k]
        k += 1
        while k < len(accepted) and accepted[k] == last + 1 and _joined(doc, last):
            last = accepted[k]
            k += 1
        start, end = doc.spans[first][0], doc.spans[last][1]
        nxt = last + 1
        if nxt < len(doc.spans) and "o" in doc.info(nxt).flags and _joined(doc, last):
            continue  # "Yıldız Holding", "Atatürk Caddesi"
        if _LIFE_DATES.match(text, end):
            continue
        if end - start < 3 or (first == last and not _single_name_ok(doc, first)):
            continue  # "de", "T.", "çağrı 0532...", "Proje Kırmızı": not enough for a name alone
        out.append((start, end))
    return out


def _single_name_ok(doc: Doc, i: int) -> bool:
    """A one-word name needs more evidence where it could be an ordinary word: in a lower-case
    or all-capitals line, or when it is a common word ("Kırmızı", "Bora"), a cue before it
    ("eşim", "sayın"), a title after it ("Hanım", "amca"), a case suffix ("berk'le"), or the
    text's last word (a signature); an initial alone is never a name."""
    info = doc.info(i)
    if info.shape == "I":
        return False
    if info.suffix:
        return True
    cue = (i > 0 and doc.info(i - 1).key in CUES) or (i + 1 < len(doc.spans) and doc.info(i + 1).key in AFTER_NAME)
    if doc.mode(i) != "mixed":
        return cue or i == len(doc.spans) - 1
    return cue or "c" not in info.flags


def _joined(doc: Doc, i: int) -> bool:
    """Tokens i and i+1 belong to one name: only a space or hyphen between them."""
    end, nxt = doc.spans[i][1], doc.spans[i + 1][0]
    return bool(_JOIN.fullmatch(doc.text, end, nxt)) or (end == nxt)
