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
    ("Pınar süt") or a quantity ("Ülker Albeni x2", "Selin kolonya 400 ml") comes right after."""
    if doc.info(first).key not in BRANDS or last > first + 1 or (last > first and "s" in doc.info(last).flags):
        return False
    nxt = last + 1
    if nxt < len(doc.spans) and _product(doc.info(nxt).key) \
            and doc.text[doc.spans[last][1] : doc.spans[nxt][0]] in (" ", "\t"):
        return True
    return _QUANTITY.match(doc.text, doc.spans[last][1]) is not None
