"""Given names as chat writes them: in lower case, with a case ending and no apostrophe
("gökhanla", "nurgülü", "hacerin", "rabianın", "oğuzhana"), and @mentions ("@gamze", "@Gökalp").

Turkish puts an apostrophe between a proper noun and its ending, but chat drops it along with
the capital, so the name hides inside a word no lexicon knows. A lower-case word is read as a
given name when it is unknown as a whole and splits into a common given name of four letters or
more (`data/given_names.txt`, not the tagger's long list, which holds many ordinary words) and
an ending that fits it by Turkish phonology: the genitive, accusative, dative or comitative, or
the endearment "-cim", with a buffer "n"/"y" after a vowel and none after a consonant, in vowel
harmony with the name's last vowel ("meltemle", "barlasla", not "barlasle"). Locative and
ablative endings are left out: "yaşında", "ayşede" read as places more often than as people.
The comitative also stands apart, as "ile": a given name right before it ("emrecan ile 2
yıldır", "satış ekibinden cemre ile bölge müdürü") is a person when it is a common given name or
no common word or place ("kura ile": a draw). Only lower-case lines are read (in prose a name
keeps its capital), so a plain prompt costs nothing here.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from fairgate.policies.detection.gazetteer import fold_key, given_names
from fairgate.policies.detection.persons.features import Doc
from fairgate.policies.detection.persons.lexicon import NOT_NAMES, lexicon_flags
from fairgate.policies.detection.special_categories_terms import starts_with_term

_DATA = Path(__file__).resolve().parents[1] / "data"
_VOWELS = "aeıioöuü"
_SOFTENED = {"d": "t", "b": "p", "c": "c", "g": "k"}  # folded: ğ -> g, ç -> c
_IMPERATIVE = re.compile("s[ıiuü]n\\Z")
# ending -> (needs a vowel before it, harmony class of its vowel); a "buffer" ending ("nin",
# "yla") follows a vowel, a bare one ("in", "la") a consonant
_ENDINGS: dict[str, tuple[bool, str]] = {}
for _vowel, _cls in (("ı", "ı"), ("i", "i"), ("u", "u"), ("ü", "ü")):
    _ENDINGS.update({f"n{_vowel}n": (True, _cls), f"{_vowel}n": (False, _cls),
                     f"y{_vowel}": (True, _cls), _vowel: (False, _cls),
                     f"c{_vowel}m": (True, _cls)})
for _vowel in "ae":
    _ENDINGS.update({f"y{_vowel}": (True, _vowel), _vowel: (False, _vowel),
                     f"yl{_vowel}": (True, _vowel), f"l{_vowel}": (False, _vowel)})
# the suffix vowel each last stem vowel allows (four-way for ı/i/u/ü, two-way for a/e)
_HARMONY = {"a": "ıa", "ı": "ıa", "o": "ua", "u": "ua", "e": "ie", "i": "ie", "ö": "üe", "ü": "üe"}
# ASCII chat writes ı as i, ü as u, ö as o: every reading of such a vowel is allowed
_ASCII = {"i": "ıi", "u": "uü", "o": "oö"}


def _readings(word: str, ascii_only: bool) -> list[str]:
    """The Turkish spellings an ASCII string may stand for ("ayseyle" -> itself; "in" -> "in", "ın")."""
    out = [""]
    for c in word:
        out = [o + x for o in out for x in (_ASCII.get(c, c) if ascii_only else c)]
    return out


def _fits(stem: str, ending: str, ascii_only: bool) -> bool:
    """The ending follows the stem: its buffer letter and its vowel's harmony."""
    after_vowel, cls = _ENDINGS[ending]
    if (stem[-1] in _VOWELS) != after_vowel:
        return False
    last = next((c for c in reversed(stem) if c in _VOWELS), "")
    return any(cls in _HARMONY.get(r, "") for r in (_ASCII.get(last, last) if ascii_only else last))


def _hard(key: str) -> str:
    """A name's last consonant as the list spells it: Turkish softens t, p, ç, k before a vowel
    ending ("mehmede", "ahmedin", "muradı": Mehmet, Ahmet, Murat)."""
    return key[:-1] + _SOFTENED[key[-1]] if key and key[-1] in _SOFTENED and key not in given_names() else key


@lru_cache(maxsize=1)
def _given_spellings() -> dict[str, frozenset[str]]:
    """Folded given name -> the list's spellings of it, with their Turkish letters ("yasin": {"yasin"})."""
    out: dict[str, set[str]] = {}
    for word in (_DATA / "given_names.txt").read_text(encoding="utf-8").split():
        out.setdefault(fold_key(word), set()).add(word)
    return {k: frozenset(v) for k, v in out.items()}


def _spelt_as_given(stem: str, key: str) -> bool:
    """A word written with Turkish letters spells the name's letters as the list does, but for a
    last consonant softened before the ending ("mehmede", "ahmedin"): a word whose "ş" or "ı" the
    name has not ("yaşına": "Yasin" + "a" only when folded) is another word."""
    return any(len(r) == len(stem) and r[:-1] == stem[:-1] for r in _given_spellings().get(key, ()))


def _given_with_ending(word: str, folded: str = "") -> bool:
    """`word` (lower case) is a common given name with a fitting ending; `folded`: its folded
    key when the caller has it (`fold_key` keeps a word's length)."""
    folded = folded or fold_key(word)
    names = given_names()
    if not any(folded[:-n] in names or _hard(folded[:-n]) in names for n in (3, 2, 1)):
        return False  # (most words: no given name before any ending)
    ascii_only = word.isascii()
    if _IMPERATIVE.search(word) or starts_with_term(folded):
        return False  # "arasın", "yazsın": a verb's; "caferi": a belief's
    for n in (3, 2, 1):
        stem = word[:-n]
        key = _hard(folded[:-n]) if n < len(word) and word[-n] in _VOWELS else folded[:-n]
        if len(stem) < 4 or key not in given_names() or key in NOT_NAMES or "c" in lexicon_flags().get(key, ""):
            continue  # (a common word too: "sevgiyle", "umutla" are "with love", "with hope")
        if not ascii_only and not _spelt_as_given(stem, key):
            continue  # Turkish letters the name has not: "yaşına" (at an age) is no "Yasin"
        if any(e in _ENDINGS and _fits(stem, e, ascii_only) for e in _readings(word[-n:], ascii_only)):
            return True
    return False


def inflected_names(doc: Doc) -> list[int]:
    """Tokens of lower-case lines that are a given name with an ending but no apostrophe."""
    out: list[int] = []
    modes, text = doc.modes(), doc.text
    if "lower" not in modes:
        return out  # (one C-level scan: most texts have no lower-case line)
    infos = doc.infos()
    for i, info in enumerate(infos):
        if modes[i] != "lower" or info.suffix:
            continue
        if i + 1 < len(infos) and infos[i + 1].key in _WITH and _with_partner(doc, i):
            out.append(i)
            continue
        if info.flags.strip("gs") or len(info.key) < 5:
            continue
        s, e = doc.spans[i]
        if _given_with_ending(text[s:e].lower(), info.key):
            out.append(i)
    return out


_WITH = frozenset(("ile", "ilen", "ilan"))  # folded ("ılan": chat's "ile")
_SPACES = re.compile(r"[ \t]+")


def _with_partner(doc: Doc, i: int) -> bool:
    """Token i is a given name before a spaced "ile": a common given name, or a given name or
    surname that is no common word, place or title ("yıldıray ile ferhat", not "kura ile")."""
    info = doc.info(i)
    if "g" not in info.flags or len(info.key) < 3 or info.key in NOT_NAMES or starts_with_term(info.key):
        return False
    if info.key not in given_names() and any(c in info.flags for c in "cpvot"):
        return False
    return _SPACES.fullmatch(doc.text, doc.spans[i][1], doc.spans[i + 1][0]) is not None


def mentioned(doc: Doc, cands: list[int]) -> list[int]:
    """Candidates written as an @mention at a word's start ("@gamze", "@Gökalp abi"): a given
    name there is a person (a team's or a shop's handle is rarely a bare given name)."""
    text, spans, out = doc.text, doc.spans, []
    for i in cands:
        s = spans[i][0]
        if s and text[s - 1] == "@" and (s == 1 or not text[s - 2].isalnum()):
            info = doc.info(i)
            if "g" in info.flags and not any(c in info.flags for c in "ot") and info.key not in NOT_NAMES:
                out.append(i)
    return out
