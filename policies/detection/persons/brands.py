"""Household brands that are given names too ("Pınar süt", "Ülker çikolatalı gofret", "Selin
kolonya 400 ml", "Duru bulgur"): in a shopping list or a shelf label the word names a product, not
the woman it is named after. Read by `names` on each name it has joined.
"""

from __future__ import annotations

import re

from fairgate.policies.detection.gazetteer import fold_key
from fairgate.policies.detection.persons.features import Doc

# consumer brands of Türkiye's shelves whose name is a given name or a name's word (folded keys)
BRANDS = frozenset(fold_key(w) for w in (
    "pınar ülker eti selin duru torku tamek komili sana yudum nuh tat tukaş dimes sütaş içim "
    "tikveşli tariş hayat elvan kent doğuş filiz kristal"
).split())
# what such a brand sells, as the word right after it ("süt", "çikolatalı", "kolonya"; folded stems)
_PRODUCT_STEMS = (
    "sut", "gofret", "cikolata", "biskuvi", "kraker", "kek", "kolonya", "makarna", "fasulye", "kahve",
    "yogurt", "ayran", "peynir", "tereyag", "zeytinyag", "margarin", "sabun", "sampuan", "deterjan",
    "salca", "ketcap", "mayonez", "dondurma", "bulgur", "pirinc", "mercimek", "nohut", "seker", "lokum",
    "meyve", "konserve", "recel", "tohum", "cay", "un", "su", "yag", "ayciceg", "krema", "puding",
)
_SHORT = frozenset(("cay", "un", "su", "yag", "kek"))  # whole words only ("su", not "sunar")
# a shelf's or a list's quantity after the product's name: "400 ml", "1 lt", "x3", "(250 g)", "2 paket"
_QUANTITY = re.compile(r"[^\n,;:.!?]{0,30}?(?<![\w.,])(?:[0-9]+(?:[.,][0-9]+)?[ \t]*(?:g|gr|kg|ml|cl|lt|l|adet|paket|kutu"
                       r"|şişe|sise|kavanoz)|x[ \t]?[0-9]+)(?![\w])", re.IGNORECASE)


def _product(key: str) -> bool:
    return key in _SHORT or any(key.startswith(stem) for stem in _PRODUCT_STEMS if stem not in _SHORT)


def household_brand(doc: Doc, first: int, last: int) -> bool:
    """The name's first word is a household brand, no surname follows it, and a product's word
    ("Pınar süt") or a quantity ("Ülker Albeni x2", "Selin kolonya 400 ml") comes right after, or
    it is an item of a shopping list ("Pınar süt 1 lt x3, Eti Cin, Ülker Albeni, ...")."""
    if doc.info(first).key not in BRANDS or last > first + 1:
        return False
    surname = last > first and "s" in doc.info(last).flags
    if surname and "c" not in doc.info(last).flags:
        return False
    nxt = last + 1
    if not surname and nxt < len(doc.spans) and _product(doc.info(nxt).key) \
            and doc.text[doc.spans[last][1] : doc.spans[nxt][0]] in (" ", "\t"):
        return True
    if not surname and _QUANTITY.match(doc.text, doc.spans[last][1]) is not None:
        return True
    return _listed(doc.text, doc.spans[first][0])


# a list's item: the brand and at most two words up to a comma or semicolon ("Eti Cin,", "Ülker Albeni;")
_ITEM = re.compile(r"[^\W\d_]+(?:[ \t]+[^\W\d_]+){0,2}[ \t]*[,;]")
# a quantity on a list's line ("2 paket", "400 ml", "x3")
_ITEM_QUANTITY = re.compile(r"(?<![\w.,])(?:[0-9]+(?:[.,][0-9]+)?[ \t]*(?:g|gr|kg|ml|cl|lt|l|adet|paket|kutu|şişe|sise|kavanoz)"
                            r"|x[ \t]?[0-9]+)(?![\w])", re.IGNORECASE)


def _listed(text: str, start: int) -> bool:
    """The brand opens an item of a shopping list: a comma before it ends the item before, a
    comma ends its own within two more words, and its line carries two quantities or more (other
    items' "2 paket", "400 ml"); not a name opening a sentence ("Pınar Kılıç, 2 adet koli ...")."""
    if not text[max(0, start - 3) : start].rstrip(" \t").endswith((",", ";")) or _ITEM.match(text, start) is None:
        return False
    lo, hi = text.rfind("\n", 0, start) + 1, text.find("\n", start)
    quantities = _ITEM_QUANTITY.finditer(text, lo, len(text) if hi == -1 else hi)
    return next(quantities, None) is not None and next(quantities, None) is not None
