"""Holy days and feasts named by a word that is a given name too ("Ramazan", "Bayram",
"Muharrem", "Nevruz"): the feast or the month where the words around it speak of a time ("Ramazan
boyunca", "önümüzdeki bayram", "Muharrem'in ilk on günü") or of its customs ("Bayram paketini",
"Newroz kutlamasına"), not a man of that name. Read by `names` on each name it has joined.
"""

from __future__ import annotations

from fairgate.policies.detection.gazetteer import fold_key
from fairgate.policies.detection.persons.features import Doc

HOLIDAYS = frozenset(("ramazan", "bayram", "muharrem", "nevruz", "newroz", "kurban"))
# a time before it: "önümüzdeki bayram", "geçen Ramazan", "her bayram", "bu ramazan"
_WHEN = frozenset(fold_key(w) for w in "önümüzdeki geçen gecen gelecek her bu".split())
# what comes after a feast's name (folded stems): its span ("boyunca", "süresince", "öncesi"),
# its customs ("paketi", "kolisi", "namazı", "sofrası", "ziyaretleri", "kutlaması", "harçlığı")
_AFTER = ("boyunca", "suresince", "oncesi", "sonrasi", "paket", "koli", "tatil", "namaz", "sofra",
          "ziyaret", "kutlama", "harcl", "ikram", "yemeg", "sekeri", "izni", "iznine")
_SPAN_START = frozenset(("ilk", "son"))  # "Muharrem'in ilk on günü", "Ramazan'ın son on gününde"


def holiday(doc: Doc, first: int, last: int) -> bool:
    """A lone feast's name (`HOLIDAYS`) with a time before it or the feast's span or custom
    right after it."""
    if first != last or (info := doc.info(first)).key not in HOLIDAYS:
        return False
    if first > 0 and doc.info(first - 1).key in _WHEN:
        return True
    if first + 1 >= len(doc.spans):
        return False
    after = doc.info(first + 1).key
    if info.suffix in ("in", "un", "nin", "nun"):  # (folded)
        return after in _SPAN_START
    return not info.suffix and after.startswith(_AFTER)
