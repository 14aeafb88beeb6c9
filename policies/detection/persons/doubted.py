"""Name tokens the tagger doubted that the lexicons and their case endings vouch for.

The tagger trained on more hand-labelled rows (issue 33, round 23) leans less on the name lists
and more on context, which reads better in general but drops a known given name whose context
it rarely saw ("berivan yine geç kaldı", "Nurcan irisini okutunca", "SAMİ ORAL") and a surname
alone or after a common given name in a person's case ("Kuzucu'ya ilettim", "Hakan Tatar'a
gönderdim"). A token it scored below its threshold but not far below (`FLOOR`) is still a name
when the lists know it as such and as nothing ordinary:

- a given name that is no common word, province, organisation or title word ("berivan", "cevdet",
  "SAMİ": a village's name too is fine, many given names are);
- in a mixed-case line, mid-sentence, capitalised with an apostrophe's case ending that is no
  place's (`alone.at_a_place`): a word the lists know only as a surname or a village
  ("Kuzucu'ya"), or such a surname (a common word too) after a common given name ("Hakan").
"""

from __future__ import annotations

import re

from fairgate.policies.detection.gazetteer import given_names
from fairgate.policies.detection.persons.alone import at_a_place
from fairgate.policies.detection.persons.features import Doc, TokenInfo
from fairgate.policies.detection.persons.lexicon import NOT_NAMES, plain_words

# below this score the tagger's doubt is taken: the lexicon readings above at 0.0 cost about a
# point of person_name precision on the tuning parts (2026-12-07), at 0.1 none
FLOOR = 0.1
_SENTENCE_GAPS = frozenset("^.N!?:~\"")  # `Doc.gap` marks before a sentence's first word (as `names`)


def doubted_names(doc: Doc, doubted: list[int]) -> list[int]:
    """The tokens of `doubted` (scored in [FLOOR, threshold)) that the lexicons vouch for."""
    out: list[int] = []
    given = given_names()
    for i in doubted:
        info = doc.info(i)
        if len(info.key) < 3 or not ("g" in info.flags or "s" in info.flags):
            continue
        if info.key not in NOT_NAMES and "g" in info.flags and not any(c in info.flags for c in "cpot") \
                and info.key not in plain_words() and not _label(doc, i):
            out.append(i)
        elif info.key not in NOT_NAMES and info.flags.strip("sv") == "" and _cased_surname(doc, i, info):
            out.append(i)
        elif info.key in given and info.shape == "C" and not info.suffix and i + 1 < len(doc.spans) \
                and doc.gap(i + 1) == "_" and _cased_surname(doc, i + 1, nxt := doc.info(i + 1)) \
                and "s" in nxt.flags and not any(c in nxt.flags for c in "pot"):
            out += (i, i + 1)  # (a common word or a people's too, "Tatar'a": after a given name a surname)
    return out


_COPULA = re.compile(r"[dt][ıiuü]r|[dt][ıiuü]")  # "Kürt'tür", "Laz'dı": said of someone, not a name's case


def _label(doc: Doc, i: int) -> bool:
    """Token i is a label at its line's start ("rojin: yarın servis kaçta" under "[not]"): one
    speaker's name or a note's heading, left to `cues.proper_given_names` (two speakers or more)."""
    start, end = doc.spans[i]
    return doc.text[end : end + 1] == ":" and not doc.text[doc.text.rfind("\n", 0, start) + 1 : start].strip()


def _cased_surname(doc: Doc, i: int, info: TokenInfo) -> bool:
    """Token i is capitalised mid-sentence in a mixed-case line, with a case ending after an
    apostrophe that is no place's and no copula's (folded keys and suffixes)."""
    return doc.mode(i) == "mixed" and info.shape == "C" and bool(info.suffix) and not at_a_place(doc, i) \
        and _COPULA.fullmatch(info.suffix) is None and doc.gap(i)[:1] not in _SENTENCE_GAPS


def plural_word(info: TokenInfo) -> bool:
    """A word no list knows in the plural ("Tavitler"): a common noun's plural, not a surname
    (the surnames in "-ler" / "-lar" that people bear, "Güler", "Köseler", are in the lists)."""
    return not info.flags and not info.suffix and len(info.key) >= 6 and info.key.endswith(("ler", "lar"))
