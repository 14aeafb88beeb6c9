"""What a word standing alone as a name says by the words around it and its case ending: a
name "X diye biri" calls someone ("serkan diye biri aradı"), "adım X" opening a clause names
its speaker though X is a common word too ("adım ufuk ..."), a given name with a surname's initial
after it is someone's name though the line is in lower case ("ozan b. derse gelmedi"), and a
place's case on a word that is no given name makes it a place ("Alsancak'ta", "Kızıldağ'dan")
rather than a person alone."""

from __future__ import annotations

import re

from fairgate.policies.detection.gazetteer import fold_key
from fairgate.policies.detection.persons.features import Doc
from fairgate.policies.detection.persons.lexicon import NOT_NAMES, plain_words
from fairgate.policies.detection.special_categories_terms import starts_with_term

_SOMEONE = frozenset(("bi", "bir", "biri", "birisi", "birini", "birine", "biriyle", "birinden"))


def called(doc: Doc, i: int) -> bool:
    """Someone "X diye" after token i ("serkan diye biri aradı", "ilkan diye bi arkadaşım var"):
    X is what they are called; not a thing so called ("sevda diye bir şey kalmadı"), nor a
    prompt's plain word ("Ne diye biri ...": `names._plain_opener_alone` counts on it)."""
    n, infos = len(doc.spans), doc.infos()
    return i + 2 < n and infos[i + 1].key == "diye" and infos[i + 2].key in _SOMEONE \
        and not (i + 3 < n and infos[i + 3].key.startswith("sey")) and infos[i].key not in plain_words()


_CLAUSE_BEFORE = re.compile(r"(?:\A|[.,:;!?\n(\[-])[ \t]*\Z")
_OPENERS = frozenset(fold_key(w) for w in "benim ben merhaba selam iyi günler".split())


def announced_given_name(doc: Doc, i: int) -> bool:
    """Token i, right after an "adım" / "ismim" (my name), is a given name, a common word too
    maybe ("ufuk", "umut"), and that "adım" opens its clause, maybe after "benim" or a greeting
    ("adım ufuk ...", "merhaba adım umut"); not after a step's "adım" ("bu adım umut verici")."""
    info, k = doc.info(i), i - 1
    if "g" not in info.flags or any(c in info.flags for c in "otp") or info.key in NOT_NAMES \
            or starts_with_term(info.key):
        return False
    lo = doc.spans[k - 1][0] if k > 0 and doc.info(k - 1).key in _OPENERS else doc.spans[k][0]
    return _CLAUSE_BEFORE.search(doc.text, 0, lo) is not None


# one letter and its dot after a word, then a space, a colon, a comma or the end ("b.", not "a.ş.")
_INITIAL_AFTER = re.compile(r"[ \t][^\W\d_]\.(?=[\s:,;)]|\Z)")


def initialled_lower(doc: Doc, cands: list[int]) -> list[tuple[int, int]]:
    """(start, end) of a given name in a lower-case line with one initial after it ("ozan b.",
    "nurhayat k.: yarın yokum"): the initial stands for a surname, so a common word that is a
    given name too ("ozan", "deniz") is a name here."""
    out: list[tuple[int, int]] = []
    for i in cands:
        info = doc.info(i)
        if doc.mode(i) != "lower" or "g" not in info.flags or info.suffix or len(info.key) < 3:
            continue
        start, end = doc.spans[i]
        if (m := _INITIAL_AFTER.match(doc.text, end)) is not None:
            out.append((start, m.end()))
    return out


# the cases one is at or comes from a place in (locative, ablative: "'ta", "'dan"), folded; a person
# alone is rather spoken of, sought or met ("'in", "'ı", "'la"); the dative only before a motion
# ("Uludağ'a kayağa gittim", "Uzunyayla'ya gelmiş"; not "Kuzucu'ya ilettim")
_PLACE_CASE = re.compile(r"[dt][ae](?:n|ki)?")
_DATIVE = re.compile(r"y?[ae]")
_MOTION_AFTER = re.compile(r"(?:[ \t]+[^\W\d_]+)?[ \t]+(?:gel|git|gid|[çc][ıi]k|ta[şs][ıi]n|g[öo][çc]|yerle[şs]|d[öo]n|ula[şs])",
                           re.IGNORECASE)


def at_a_place(doc: Doc, i: int) -> bool:
    """Token i's case ending says one is at, comes from or goes to it."""
    suffix = doc.info(i).suffix
    if _PLACE_CASE.fullmatch(suffix):
        return True
    return _DATIVE.fullmatch(suffix) is not None and _MOTION_AFTER.match(doc.text, doc.spans[i][1]) is not None
