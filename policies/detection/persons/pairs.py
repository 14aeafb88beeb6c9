"""Capitalised pairs the lexicons read as a given name and then a surname, kept even where the
tagger doubts them: a surname no list knows ("Nazar Hakobyan"), one that is a common word too
("Bahar Koçak'ın"), one with a surname's ending ("Şairoğlu"), and a pair in a place's case.

A person in a place's case: clinical and laboratory reports put the patient in the locative
("Hasta Nilgün Ersoylu'da BRCA2 varyantı saptandı", "hastamız Eylül Büyükkahraman'da bipolar
bozukluk": found in X). A lone word in that case is a place more often than a person
(`alone.at_a_place`), and many surnames are village names too ("Karakuşlu", "Ersoylu"), so the
tagger drops the pair; but a surname right after a given name is no place. Such a pair is kept
when the given name is capitalised mid-sentence and the second word is capitalised and no
province, given name, common word, organisation or title: "Selin Kadıköy'de", "Hacı
Bayram'da", "Ayşe Hanım'da" and "Ahmet Kaya'da" are left to the other rules and the tagger.
"""

from __future__ import annotations

import re

from fairgate.policies.detection.persons.features import Doc
from fairgate.policies.detection.persons.lexicon import HEADINGS, NOT_NAMES, TRADE_WORDS
from fairgate.policies.detection.persons.name_words import never_a_name, on_behalf
from fairgate.policies.detection.persons.non_private import joined
from fairgate.policies.detection.special_categories_terms import starts_with_term

# endings only a surname has, on a word no lexicon knows (not "-yan", also a participle's: "Arayan")
_SURNAME_SHAPES = ("oglu", "ogullari", "zade", "ian")


def lexicon_pairs(doc: Doc, tokens: list[int]) -> list[int]:
    """Tokens of capitalised pairs the lexicons read as a given name and then a surname (or a
    word no lexicon knows: "Nazar Hakobyan"), kept even when the tagger doubts them."""
    out: list[int] = []
    for i in tokens:
        if i + 1 >= len(doc.spans) or doc.mode(i) == "lower" or not joined(doc, i):
            continue
        a, b = doc.info(i), doc.info(i + 1)
        if _located(doc, i):
            out += (i, i + 1)
            continue
        if a.shape not in "CU" or b.shape not in "CU" or "g" not in a.flags or never_a_name(doc, a, i):
            continue
        if any(c in a.flags + b.flags for c in "ot") or b.key in NOT_NAMES:
            continue
        if on_behalf(doc, i + 1) and ("s" in b.flags or "c" not in b.flags):
            out += (i, i + 1)  # "Fatura Şirin Karakoçan adına kesildi": whatever else the words are
        elif "p" in a.flags + b.flags:
            continue
        elif "c" not in a.flags + b.flags:
            if "s" in b.flags or not b.flags:
                out += (i, i + 1)
        elif _common_pair_is_a_name(doc, i) or (not b.flags and b.key.endswith(_SURNAME_SHAPES) and not a.suffix):
            out += (i, i + 1)  # (a given name that is a word too, then "Şairoğlu")
    return out


_CELL_END = re.compile(r"[ \t]*(?:,|\n|\Z)")


def _common_pair_is_a_name(doc: Doc, i: int) -> bool:
    """A given name and a surname that the common-word list also holds ("Bahar Koçak'ın", "Cem
    Akıncı", "Umut Karabulut": the list has many surnames): a name mid-sentence in a mixed-case
    line, with the second word a listed surname and no title head after it; or the whole first
    cell of a line, a comma or the line's end after it (an address label's "Ali Kaya, Yenice
    mahallesi ...", a signature)."""
    a, b = doc.info(i), doc.info(i + 1)
    if doc.mode(i) != "mixed" or a.shape != "C" or b.shape != "C" or "s" not in b.flags or len(b.key) < 3 \
            or b.key in TRADE_WORDS or a.suffix or (i + 2 < len(doc.spans) and doc.info(i + 2).key in HEADINGS):
        return False  # ("Kaya Yapı'da": a firm; "Ekin'in Kürt": the name ended)
    if starts_with_term(b.key):
        return False  # ("Kürt" is a people)
    return doc.gap(i)[:1] not in ("^", ".", "N") or (doc.gap(i)[:1] in ("^", "N")
                                                      and _CELL_END.match(doc.text, doc.spans[i + 1][1]) is not None)


# folded locative and ablative endings after an apostrophe; with an "n" only after an "-oğlu"
# surname's possessive ("Karaoğlu'nda"), not a place's compound ("Sağlıklı Hayat Merkezleri'nde")
_AT_FROM = frozenset(("da", "de", "ta", "te", "dan", "den", "tan", "ten", "nda", "nde", "ndan", "nden"))
_MID = frozenset("_,(")  # `Doc.gap` marks inside a sentence: a space, a comma, a bracket


def _located(doc: Doc, i: int) -> bool:
    """Tokens i and i+1 are a given name and a surname in a place's case, mid-sentence."""
    if i == 0 or doc.mode(i) != "mixed" or doc.gap(i)[:1] not in _MID or doc.gap(i + 1) != "_":
        return False
    a, b = doc.info(i), doc.info(i + 1)
    if b.suffix not in _AT_FROM or a.shape != "C" or b.shape != "C" or "g" not in a.flags \
            or len(b.key) < 4 or b.key in NOT_NAMES or (b.suffix[0] == "n" and not b.key.endswith("oglu")):
        return False
    return not any(c in a.flags for c in "pot") and not any(c in b.flags for c in "pgcot")
