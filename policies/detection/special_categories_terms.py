"""The KVKK Article 6 category terms (Turkish and English), shared by the detector and the
trigger pass: one word list per category in `data/special/<category>.txt`, written from the
language (diseases, drugs, departments, beliefs and practices, peoples and mother tongues,
parties and ideologies, unions, orientations, offences and sentences, biometric and genetic
words, religious dress, associations), not from any labelled row.

Terms are stems: a term matches at the start of a word and any suffix may follow, so
"kemoterapi" also finds "kemoterapisi", "kemoterapiye" and "kemoterapideyim" (Turkish is
agglutinative; a stem prefix costs nothing in the trigger pass's DFA, where running a stemmer
on every word would). A stem ending in p/ç/t/k also matches its softened form before a vowel
("kalp" -> "kalbi", "ilaç" -> "ilacı", "fıtık" -> "fıtığı"). Turkish letters match loosely
(dotless/accentless forms too). Markers: "=" keeps a term's letters exact ("Kürt" is an ethnic
origin, "Kurt" a common surname); a trailing "$" makes it a whole word, optionally with an
apostrophe suffix or a copula ("Laz", "Lazdır", not "lazım"; "gay", not "gayret"). A line "!word" names a word that
begins like a term but is none, and no word beginning so is read as one ("!engelliyo": the verb
"engelliyor", "blocks", is no disability's "engelli").

The trigger pass (RE2) finds where a term starts and ends; `term_at` names its category by the
matched text's folded form (a dictionary lookup, not a second regex over a thousand
alternatives).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from fairgate.policies.detection.gazetteer import fold_key

_DATA = Path(__file__).with_name("data") / "special"
# the order findings' kinds are listed in (DETECTOR_KINDS)
CATEGORIES = ("health", "religion", "ethnicity", "politics", "union", "sexual_life", "criminal", "biometric",
              "genetic", "appearance", "association")
_LOOSE = {"ı": "[ıiIİ]", "i": "[iıİI]", "ş": "[şsŞS]", "s": "[sşSŞ]", "ğ": "[ğgĞG]", "ü": "[üuÜU]",
          "ö": "[öoÖO]", "ç": "[çcÇC]", "û": "[ûuÛU]", "â": "[âaÂA]", "î": "[îiÎI]", " ": r"[ \t_]+", "'": "['’]?"}
_EXACT = {"i": "[iIİ]", "ı": "[ıI]"}  # an exact term's i and ı in capitals too
_SOFT = {"p": "b", "ç": "c", "t": "d", "k": "ğ"}  # a stem's last consonant before a vowel suffix
_SPACES = re.compile(r"[ \t_]+")
_WORD_RUN = re.compile(r"\w*")
# a whole word's end: an apostrophe's case ending, or a copula glued on, which no other word
# shares ("ermeniymiş", "Lazdır", "gebeymiş", "firariydi"; not the "-Im" of "lazım")
_WORD_END = re.compile(r"(?:['’][^\W\d_]{1,6}|y?m[ıiuü][şs](?:l[ae]r)?|y?[dt][ıiuü](?:r(?:l[ae]r)?|l[ae]r)?)?(?!\w)")


@dataclass(slots=True, frozen=True)
class Term:
    category: str
    whole_word: bool  # "$": no suffix but an apostrophe one
    charged_only: bool = False  # offences.txt's bare offence: a record's only with its sentence or charge label


# offences by their bare names (offences.txt): criminal-record terms only in a record's shape
_OFFENCES = "offences"


def _read(category: str) -> list[str]:
    lines = (_DATA / f"{category}.txt").read_text(encoding="utf-8").splitlines()
    terms = [t for t in (line.rstrip("\n") for line in lines) if t.strip() and not t.startswith(("#", "!"))]
    return terms + [stem for t in terms if (stem := _possessed_stem(t))]


# a phrase's head noun in the third person's possessive ("din hanesi", "doğum lekesi", "iris verisi")
_THIRD_POSSESSIVE = re.compile(r"[^ ]+ [^ ]*[aeıioöuü]s[ıiuü]")


def _possessed_stem(term: str) -> str | None:
    """The phrase without its "-sı": the stem every person's possessive follows ("din hanemi",
    "doğum lekem", "iris verimizi"), where the list writes the third person's only."""
    if term[:1] == "=" or term.endswith("$") or not _THIRD_POSSESSIVE.fullmatch(term):
        return None
    return term[:-2]


@lru_cache(maxsize=1)
def _not_terms() -> tuple[str, ...]:
    """Folded beginnings of words that start like a term but are none ("!engelliyo")."""
    out = []
    for category in CATEGORIES:
        lines = (_DATA / f"{category}.txt").read_text(encoding="utf-8").splitlines()
        out += [_fold(line[1:].strip()) for line in lines if line.startswith("!")]
    return tuple(out)


def _soft(term: str) -> bool:
    return not term.startswith("=") and not term.endswith("$") and len(term) >= 4 and term[-1] in _SOFT


def _fold(matched: str) -> str:
    return _SPACES.sub(" ", fold_key(matched)).replace("'", "").replace("’", "")


def loose(term: str) -> str:
    """A term as an RE2 pattern (no lookaround): Turkish letters also match their dotless /
    accentless forms, "=" keeps its letters exact, a last p/ç/t/k also matches its soft form;
    a "$" is left to `term_at`."""
    term = term.removesuffix("$")
    if term.startswith("="):  # (Turkish capitals: "SÜRYANİ", whose "İ" no case folding makes "i")
        return "".join(_EXACT.get(c, f"[{c}{c.upper()}]") if c.isalpha() else re.escape(c) for c in term[1:])
    last = ""
    if _soft(term):
        hard, soft = term[-1], _SOFT[term[-1]]
        last, term = f"(?:{_LOOSE.get(hard, hard)}|{_LOOSE.get(soft, soft)})", term[:-1]
    return "".join(_LOOSE.get(c, re.escape(c)) for c in term) + last


@lru_cache(maxsize=1)
def _terms() -> dict[str, list[str]]:
    return {c: _read(c) + (_read(_OFFENCES) if c == "criminal" else []) for c in CATEGORIES}


@lru_cache(maxsize=1)
def _lookup() -> dict[str, Term]:
    """Folded matched text -> its term (the first category listing it wins)."""
    out: dict[str, Term] = {}
    # (a bare offence criminal.txt lists too keeps its plain reading there)
    charged = set(_read(_OFFENCES)) - set(_read("criminal"))
    for category, terms in _terms().items():
        for t in terms:
            entry = Term(category, t.endswith("$"), category == "criminal" and t in charged)
            bare = t.removesuffix("$").removeprefix("=")
            keys = [_fold(bare)] + ([_fold(bare[:-1] + _SOFT[bare[-1]])] if _soft(t) else [])
            for key in keys:
                out.setdefault(key, entry)
    return out


def term_alternation() -> str:
    """Every term as one RE2 alternation, longest first (RE2 takes the first alternative that
    matches at a position, so "süryani ortodoks" wins over "süryani"); a term's length without its
    markers, so "erkek arkadaşım" wins over "erkek arkadaşı$")."""
    terms = sorted({t for ts in _terms().values() for t in ts},
                   key=lambda t: (-len(t.removesuffix("$").removeprefix("=")), t))
    return "|".join(loose(t) for t in terms)


@lru_cache(maxsize=1)
def _exact_lookup() -> dict[str, Term]:
    """Exact ("=") terms by their lower-case letters, read before the folded lookup where the
    folded key's term is of the same category: "=kurt$" (Kürt in ASCII, a whole word) and
    "=kürt" (any suffix) fold to one key. (Where another category claims the folded key first,
    as religion's "ezidi" does ethnicity's "=ezidi", it keeps it.)"""
    folded = _lookup()
    return {t[1:].removesuffix("$").lower(): Term(c, t.endswith("$"))
            for c, terms in _terms().items() for t in terms
            if t.startswith("=") and folded[_fold(t[1:].removesuffix("$"))].category == c}


def term_at(text: str, start: int, end: int) -> str | None:
    """The category of the term the trigger pass found at text[start:end], or None where it is
    not one: inside a word, or a whole-word term followed by more letters."""
    if start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
        return None
    term = _exact_lookup().get(text[start:end].lower()) or _lookup().get(_fold(text[start:end]))
    if term is None or (term.whole_word and not _WORD_END.match(text, end)):
        return None
    word = _WORD_RUN.match(text, start) if _not_terms() else None
    if word is not None and _fold(word.group()).startswith(_not_terms()):
        return None  # "engelliyor": a word that only begins like the term
    return term.category


def charged_only(text: str, start: int, end: int) -> bool:
    """The term found at text[start:end] is a bare offence's name (offences.txt), which counts
    only in a record's shape (`special_offences`)."""
    term = _lookup().get(_fold(text[start:end]))
    return term is not None and term.charged_only


def inside_a_word(text: str, end: int) -> bool:
    """The word a term found at text[..end] starts goes on with letters that are no apostrophe
    ending, copula or plural of it ("Kurtcebe", a surname, after "Kurtçe"; not "Kürtmüş",
    "Laz'ım", "Süryaniler")."""
    return end < len(text) and text[end].isalpha() and _WORD_END.match(text, end) is None \
        and _PLURAL.match(text, end) is None


_PLURAL = re.compile(r"l[ae]r", re.IGNORECASE)


def starts_with_term(key: str) -> bool:
    """A folded word begins with a category term ("budistim", "sırp", "hristiyanlığa"): a belief,
    people or disease word, which no relation or greeting makes a name."""
    lookup = _lookup()
    for n in range(3, len(key) + 1):
        term = lookup.get(key[:n])
        if term is not None and (n == len(key) or not term.whole_word):
            return True
    return False


# a first person's possessive at a folded term's end, with a case ending maybe ("izimi", "kolumda")
_MY_END = re.compile(r"[iu]m(?:[iu]n?|[ae]|d[ae]n?|l[ae])?\Z")
_MY_GENITIVE = re.compile(r"[iu]m[iu]n ")  # (not "our": "Derneğimizin üye sayısı" is a body speaking)
# a first word's first-person object ("yüzümü tarat", "başımı ört", "parmağımı okut")
_MY_OBJECT = re.compile(r"\A(\w+[iu])m([iu]|[ae]) ")


def says_mine(text: str, start: int, end: int) -> bool:
    """The term found at text[start:end] is a listed term's first-person possessive ("parmak
    izimi ... aldılar"), the list holding the third person's form too ("parmak izi"): the
    trigger pass takes the longest term, so no suffix after it says "my"."""
    key = _fold(text[start:end])
    if _MY_GENITIVE.search(key):
        return True  # the term's own first-person genitive: "parmağımın izi", "parmaklarımın izi"
    if _MY_OBJECT.match(key) and _MY_OBJECT.sub(r"\1n\2 ", key) in _lookup():
        return True  # "yüzümü tarat" where "yüzünü tarat" is listed too (not "doğumu var": no "doğunu")
    m = _MY_END.search(key)
    return m is not None and key[: m.start() + 1] in _lookup()
