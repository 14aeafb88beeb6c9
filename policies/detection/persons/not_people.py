"""Words that read as a person's name but, where they stand, are something else: a disease's
finder ("Lynch sendromu"), the town after an address's postcode ("00-640 Warszawa"), a figure of
a life-dated encyclopaedia entry ("Kâtip Çelebi (1609–1657), asıl adı Mustafa"), a character of a
plot or of a sentence about a series or a film, and a relation called by a title ("Eşi teyze").
Read by `names` on each name it has joined."""

from __future__ import annotations

import re

from fairgate.policies.detection.gazetteer import given_names
from fairgate.policies.detection.no_ones import synopsis
from fairgate.policies.detection.person_links import person_word
from fairgate.policies.detection.persons.features import Doc
from fairgate.policies.detection.persons.non_private import joined, life_dated_entry


def something_else(doc: Doc, first: int, last: int) -> bool:
    """The name at tokens first..last names a disease, a town, an entry's figure or a character."""
    text, start, end = doc.text, doc.spans[first][0], doc.spans[last][1]
    if first == last and _eponym(doc, first):
        return True  # "Lynch sendromu", "Parkinson's disease"
    if _of_old(doc, first, last):
        return True  # "İshak Paşa", "Mor Gabriel", "Surp Kevork"
    if _AFTER_POSTCODE.search(text, max(0, start - 16), start):
        return True  # "ul. Mokotowska 12/4, 00-640 Warszawa"
    # another figure of a life-dated entry (parents, teachers), or a plot's or a screen's character
    return life_dated_entry(text, start) or synopsis(text, start) or _on_screen(text, start, end)


# an Ottoman general's or governor's title after a name ("Çolak Abdi Paşa", "İshak Paşa döneminde"),
# and a Syriac, Armenian or Greek saint's before it ("Mor Gabriel", "Surp Kevork", "Ayios Dimitrios"),
# or the Hebrew "Neve" of a synagogue's name ("Neve Şalom'da"): a historical figure or a place named
# after one, not a private person today (folded keys; an apostrophe's ending dropped). Not
# "Efendi": a doorkeeper is still "kapıcı Cuma Efendi"; nor "Aziz", a common given name too.
_OLD_TITLES = frozenset(("pasa",))
_SAINTS = frozenset(("mor", "surp", "ayios", "agios", "neve"))


def _of_old(doc: Doc, first: int, last: int) -> bool:
    """A name titled the old way: "Paşa" last or right after it, or a saint's title before it."""
    if doc.info(last).key in _OLD_TITLES and last > first:
        return True
    if last + 1 < len(doc.spans) and doc.info(last + 1).key in _OLD_TITLES and joined(doc, last):
        return True
    return (
        first > 0
        and doc.info(first - 1).key in _SAINTS
        and doc.info(first - 1).shape == "C"
        and joined(doc, first - 1)
    )


_LETTER_GAP = re.compile(r"[ \t]+[A-Z0-9][ \t]+")
# what follows a finder's name in a disease's or a syndrome's name (folded, as a word's start)
_EPONYM_HEADS = ("sendrom", "hastalig", "disease", "syndrome")


def _eponym(doc: Doc, i: int) -> bool:
    """Token i, a word no list gives as a given name, names a disease or syndrome with the word
    after it ("Lynch sendromu", "Fragile X"'s "X" aside, "Parkinson's disease"); a given name before
    "hastalığı" is a person's illness ("Ali hastalığı nedeniyle izinli")."""
    if "g" in doc.info(i).flags or i + 1 >= len(doc.spans):
        return False
    if not joined(doc, i) and _LETTER_GAP.fullmatch(doc.text, doc.spans[i][1], doc.spans[i + 1][0]) is None:
        return False  # (a letter the tokens leave out may stand between: "Fragile X sendromu")
    after = doc.info(i + 1).key
    if len(after) == 1 and i + 2 < len(doc.spans) and joined(doc, i + 1):
        after = doc.info(i + 2).key  # "Fragile X sendromu"
    return after.startswith(_EPONYM_HEADS)


# a series', a film's or a scene's word ("Dizide Nazlı'nın ...", "filmdeki", "kavga sahnesi")
_SCREEN = re.compile(r"(?<!\w)(?:dizi(?:de|deki|nin|yi)|film(?:de|deki|in)|sahne(?:si|sinde|de)|karakter(?:i|ini|inin)?)(?!\w)",
                     re.IGNORECASE)


def _on_screen(text: str, start: int, end: int) -> bool:
    """The name's sentence is about a series or a film ("Dizide Nazlı'nın Kerem'i aldattığı
    sahne", "doğa ile fatih'in kavga sahnesi"): its people are characters or actors."""
    lo = max(0, *(text.rfind(c, 0, start) + 1 for c in ".!?\n"))
    stop = _SENTENCE_STOP.search(text, end)
    hi = stop.start() if stop else len(text)
    return hi - lo <= 300 and _SCREEN.search(text, lo, hi) is not None


_SENTENCE_STOP = re.compile(r"[.!?\n]")


# an address's postcode after a comma, right before the word ("12/4, 00-640 Warszawa", "No:7, 34710 Kadıköy")
_AFTER_POSTCODE = re.compile(r",[ \t]*(?:[0-9]{2}-[0-9]{3}|[0-9]{5})[ \t]+\Z")


def kin_titled(key: str) -> bool:
    """A relation word in the third person's possessive ("eşi", "kızı", "gelini"; ASCII "esi")
    that no common given name's list holds: before an honorific it is the way a family calls
    someone's relation ("Talip amcanın eşi teyze"), not a name."""
    return key[-1:] in ("i", "u") and person_word(key) and key not in given_names()
