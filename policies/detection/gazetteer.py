"""Turkish given names, surnames, provinces and districts (compiled into policies/detection/data/*.txt).

Lookups use a folded key (Turkish lower case, then accents dropped: "İSTANBUL", "Istanbul" and
"istanbul" are one key), so text whose accents arrived decomposed and were dropped by the
normaliser still matches.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

_DATA = Path(__file__).with_name("data")
_ASCII = str.maketrans("çğıöşüâîû", "cgiosuaiu")


def fold_key(word: str) -> str:
    """Turkish-aware lower case without accents. ASCII text folds to its lower case ("I" to "ı"
    to "i"; the other letters the table maps are not ASCII), at a twentieth of the cost."""
    if word.isascii():
        return word.lower()
    return word.replace("I", "ı").replace("İ", "i").lower().translate(_ASCII)


def _words(name: str) -> frozenset[str]:
    text = (_DATA / name).read_text(encoding="utf-8")
    return frozenset(fold_key(w) for w in text.split())


@lru_cache(maxsize=1)
def given_names() -> frozenset[str]:
    return _words("given_names.txt")


@lru_cache(maxsize=1)
def surnames() -> frozenset[str]:
    return _words("surnames.txt")


@lru_cache(maxsize=1)
def places() -> frozenset[str]:
    """Every province and district name (folded)."""
    out: set[str] = set()
    for line in (_DATA / "provinces.txt").read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        province, _, districts = line.partition(":")
        out.add(fold_key(province.strip()))
        out.update(fold_key(d.strip()) for d in districts.split(",") if d.strip())
    return frozenset(out)


@lru_cache(maxsize=1)
def provinces() -> frozenset[str]:
    """The 81 provinces' names (folded), without their districts."""
    lines = (_DATA / "provinces.txt").read_text(encoding="utf-8").splitlines()
    return frozenset(fold_key(line.partition(":")[0].strip()) for line in lines if line and not line.startswith("#"))


def is_person_name(words: list[str]) -> bool:
    """Two or three capitalised words: a known given name, then a known given name or
    surname, or a surname last."""
    keys = [fold_key(w) for w in words]
    if keys[0] not in given_names():
        return False
    return keys[-1] in surnames() or keys[1] in given_names() or keys[1] in surnames()
