"""Words around a name that tell it is one where the lists alone would not: a month or a weekday
that is a common given name too ("Cuma", "Kasım", "Nisan", "Eylül"; never a name on its own, in
`NOT_NAMES`) before a title or a surname, and "adına" ("in the name of") after a name."""

from __future__ import annotations

from fairgate.policies.detection.persons.features import Doc, TokenInfo
from fairgate.policies.detection.persons.lexicon import AFTER_NAME, NOT_NAMES, common_words
from fairgate.policies.detection.persons.non_private import joined

# months and a weekday that are common given names too ("Kasım Bey", "Cuma Efendi", "Nisan Hanım")
_CALENDAR_NAMES = frozenset(("cuma", "kasim", "nisan", "eylul"))


def never_a_name(doc: Doc, info: TokenInfo, i: int) -> bool:
    """A word of `NOT_NAMES` ("Cuma", "Kasım", "Türk"), but a month's or a weekday's that is a
    given name too, capitalised right before a title in its plain form or a surname capitalised
    like it ("kapıcı Cuma Efendi", "Kasım Bey", "öğrencimiz Eylül Karaçam"; not "Cuma günü",
    "Kasım ayında")."""
    if info.key not in NOT_NAMES:
        return False
    if info.key not in _CALENDAR_NAMES or info.shape not in "CU" or i + 1 >= len(doc.spans) or not joined(doc, i):
        return True
    after = doc.info(i + 1)
    if after.key in AFTER_NAME:
        return False
    # (a common word's possessive makes a compound, no surname: "Nisan Yağmuru", "Eylül Sonu")
    compound = after.key[-1:] in ("i", "u") and (after.key[:-1] in common_words() or after.key[:-2] in common_words())
    return after.shape != info.shape or "s" not in after.flags or any(c in after.flags for c in "ot") or compound


# "in the name of", right after a name: an invoice, a line or an account held by that person
_ON_BEHALF = frozenset(("adina", "namina"))


def on_behalf(doc: Doc, i: int) -> bool:
    """Token i, a name's last word with no case ending, has "adına" / "namına" right after it."""
    return i + 1 < len(doc.spans) and not doc.info(i).suffix and doc.info(i + 1).key in _ON_BEHALF and joined(doc, i)
