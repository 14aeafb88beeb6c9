"""Whether a people's name in text is a person's origin: peoples whose name is also a common word
("roman", "kurt", "arap") only when said of someone, a language named as a skill (a translator's
pair, a CV's languages) rather than an origin, a region's people ("Hatay'ın Arapları", "HATAYLI
ARAP"), and "kökenli" / "asıllı" after a common word ("Toplum kökenli pnömoni"). Read by
`special_categories` on each ethnicity term."""

from __future__ import annotations

import re

from fairgate.policies.detection.gazetteer import fold_key, provinces
from fairgate.policies.detection.person_links import person_word
from fairgate.policies.detection.persons.lexicon import all_places, lexicon_flags
from fairgate.policies.detection.special_categories_terms import term_at

# peoples whose name is also a common word ("roman": a novel; "kurt", Kürt written in ASCII: a
# wolf, a surname; "arap", "rus": a soap, a salad, a spring): one only said of someone
WORD_PEOPLES = frozenset(("roman", "kurt", "arap", "rus", "akan", "ewe"))
# words that give a family's side or a person's descent right before a people ("anne tarafı Akan",
# "baba tarafım Roman", "aslen Ewe"), folded
_DESCENT = frozenset(("aslen", "tarafi", "tarafim", "tarafimiz"))
# a language's name ("Kürtçe", "ERMENİCE", "arapca"; Kurdish's own "Kurmancî", "Zazaki"), then other
# languages and a verb of knowing it, or another language after a dash or slash: a translator's pair
# or a CV's skills, not one's origin
_LANGUAGE = r"[^\W\d_]+(?:[cç][ae]|[cç][iîı]|ki)(?![^\W\d_])"
_LANGUAGE_WORD = re.compile(_LANGUAGE, re.IGNORECASE)
_KNOWN_AFTER = re.compile(
    r"(?:[ \t]*(?:,|ve|/)[ \t]*[^\W\d_]+[cç][ae])*[ \t]+(?:bil(?:iyor|ir|en|di[gğ])|konu[şs]abil)"
    rf"|[ \t]*[–/\-][ \t]*{_LANGUAGE}",
    re.IGNORECASE,
)
# another language and a dash or slash right before the term ("Türkçe/Kurmanci")
_PAIRED_BEFORE = re.compile(rf"(?<![^\W\d_]){_LANGUAGE}[ \t]*[–/\-][ \t]*\Z", re.IGNORECASE)
_TRANSLATOR = re.compile(r"(?<!\w)(?:[çc]evirmen|terc[üu]man|translator)", re.IGNORECASE)


def a_skill(text: str, start: int) -> bool:
    """The ethnicity term is a language named as a skill: known, paired with another language by a
    dash or slash, or translated from or into."""
    word = _LANGUAGE_WORD.match(text, start)
    if word is None:
        return False
    line_lo = text.rfind("\n", 0, start) + 1
    return (
        _KNOWN_AFTER.match(text, word.end()) is not None
        or _PAIRED_BEFORE.search(text, max(line_lo, start - 30), start) is not None
        or _TRANSLATOR.search(text, max(line_lo, start - 60), start) is not None
    )


_WORD_BEFORE_TERM = re.compile(r"([^\W\d_]+)[ \t]+\Z")
_PLACE_BEFORE_TERM = re.compile(r"([^\W\d_]+)(?:['’][^\W\d_]{1,3})?[ \t]+\Z")


def said_of_someone(text: str, start: int) -> bool:
    """A relation or role word, a family's side or "aslen" right before the term ("Komşumuz
    Roman", "esi Roman", "anne tarafı Akan"), a hometown before it ("Diyarbakirli bir Kurt",
    "Halepli Arap"), or a people's word after it
    ("ROMAN TOPLULUĞUNDAN OLAN", "Roman vatandaşlar", "Roman aile"; not a Russian's citizenship)."""
    before = _WORD_BEFORE_TERM.search(text, max(0, start - 30), start)
    if before is not None and (
        (key := fold_key(before.group(1))) in _DESCENT or person_word(key) or _hometown(text, start)
    ):
        return True
    if regions_people(text, start):
        return True
    after = _PEOPLE_AFTER.match(text, start)
    return after is not None and not (
        text[start : start + 3].lower() in ("rus", "ara") and "vatanda" in after.group().lower()
    )


def regions_people(text: str, start: int) -> bool:
    """A province right before the term: a region's people ("Hatay'ın Arapları"; not a village's
    name, which many surnames and common words are)."""
    lo = max(0, start - 40)
    place = _PLACE_BEFORE_TERM.search(text, lo, start) or _FROM_PLACE.search(
        text, lo, start
    )  # (or "HATAYLI ARAP")
    return place is not None and fold_key(place.group(1)) in provinces()


# a word made of a place and "-lı" ("Volgogradlı", "samandağlı"), maybe "bir" between it and the people
_FROM_PLACE = re.compile(
    r"([^\W\d_]{3,}?)['’]?(?:l[ıiuü]|L[IİUÜ])[ \t]+(?:bir[ \t]+|BİR[ \t]+)?\Z"
)  # (or in capitals: "HATAYLI ARAP")


def _hometown(text: str, start: int) -> bool:
    """A place's "-lı" word stands right before the term: a place the lexicons know, or a
    capitalised word within its sentence (a town abroad: "Volgogradlı bir Rus")."""
    m = _FROM_PLACE.search(text, max(0, start - 40), start)
    if m is None:
        return False
    if fold_key(m.group(1)) in all_places():
        return True
    lead = text[max(0, m.start() - 2) : m.start()]
    return (
        m.group(1)[0].isupper()
        and m.start() > 1
        and not lead.rstrip(" \t").endswith((".", "!", "?", "\n", ":"))
    )


_PEOPLE_AFTER = re.compile(
    r"\w+[ \t]+(?:toplulu[gğk]|vatanda[şs]|aile|k[öo]kenl|as[ıi]ll|mahalles)", re.IGNORECASE
)


_ORIGIN = re.compile(r"k[öo]kenl[iı]|as[ıi]ll[ıi]", re.IGNORECASE)
_WORD_BEFORE = re.compile(r"([^\W\d_]+)[ \t]+\Z")


def origin_of_no_people(text: str, start: int, end: int) -> bool:
    """'kökenli' / 'asıllı' after a common word: 'Toplum kökenli pnömoni', 'tiyatro kökenli
    oyuncu' (a people or a region is a proper noun or a category term: 'Oromo kökenli', 'Afrika
    kökenli', 'Kürt kökenli')."""
    if not _ORIGIN.match(text, start):
        return False
    before = _WORD_BEFORE.search(text, max(0, start - 30), start)
    if before is None:
        return False
    word = before.group(1)
    if term_at(text, before.start(1), before.end(1)) is not None:
        return False  # "Kürt kökenli", "ermeni asıllı"
    line = text[text.rfind("\n", 0, start) + 1 : start]
    flags = lexicon_flags().get(fold_key(word), "")
    # (a common word capitalised mid-sentence is a proper noun: "Müdürümüz Arap asıllı")
    proper = (
        word[:1].isupper()
        and not line.isupper()
        and before.start(1) > len(text) - len(text.lstrip())
        and text[: before.start(1)].rstrip()[-1:] not in ("", ".", "!", "?", ":", "\n", '"')
    )
    return (word.islower() and not line.islower()) or (
        "c" in flags and "p" not in flags and not proper
    )
