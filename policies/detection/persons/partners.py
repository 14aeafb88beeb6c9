"""The words joined to a name token the tagger accepted in a line without casing, which complete
the name with it where the tagger's higher threshold there (no casing to go on) left them out."""

from __future__ import annotations

from fairgate.policies.detection.gazetteer import given_names
from fairgate.policies.detection.persons.features import Doc, TokenInfo
from fairgate.policies.detection.persons.lexicon import (
    HEADINGS,
    NOT_NAMES,
    common_words,
    lexicon_flags,
)
from fairgate.policies.detection.persons.non_private import joined

_SURNAME_ENDS = ("oglu", "ogullari", "yan", "ian", "zade", "gil")


def uncased_partners(doc: Doc, accepted: list[int]) -> list[int]:
    """In a line of capitals, a common given name before an accepted token ("İSMET ÖZKAN",
    "ŞÜKRAN ALKAYA") and a surname after it ("İDRİS BAYSAL", "SERDAR KUYUMCUOĞLU'NUN"); in a
    lower-case line only a surname after it that the lexicons know as nothing but a surname or
    a village ("nurettin yavaşça'ya sorun", "alıcı adı kemal yaycılı"): a chat's "annem
    tarikata", "bilen var" pair up with any word. In any line, a surname made of a place or a
    word and "-lı" that no list knows but as a village after a given name ("Cemile Akpınarlı",
    "İBRAHİM KOZANLI'YA", "nurettin yalvacli'ya"): the tagger reads such a word as an origin."""
    out: list[int] = []
    given, n = given_names(), len(doc.spans)
    for i in accepted:
        own, mode = doc.info(i), doc.mode(i)
        if i + 1 < n and "g" in own.flags and not own.suffix and joined(doc, i) and i + 1 not in accepted \
                and _place_surname(doc.info(i + 1), mode):
            out.append(i + 1)
            continue
        if mode == "mixed" or own.suffix or not ("g" in own.flags or "s" in own.flags) \
                or ("c" in own.flags and own.key not in given) or any(c in own.flags for c in "otp"):
            continue
        if mode == "caps" and i > 0 and joined(doc, i - 1) and i - 1 not in accepted:
            prev = doc.info(i - 1)
            if "g" in prev.flags and not prev.suffix and ("c" not in prev.flags or prev.key in given) \
                    and not any(c in prev.flags for c in "otp") and prev.key not in NOT_NAMES:
                out.append(i - 1)
        if i + 1 < n and joined(doc, i) and i + 1 not in accepted and _surname_after(doc.info(i + 1), mode):
            out.append(i + 1)
    return out


def _surname_after(nxt: TokenInfo, mode: str) -> bool:
    if nxt.key in NOT_NAMES or nxt.key in HEADINGS or len(nxt.key) < 3:
        return False
    if mode == "lower":
        return bool(nxt.flags) and nxt.flags.strip("sv") == "" and not _possessed_word(nxt.key)
    return ("s" in nxt.flags or nxt.key.endswith(_SURNAME_ENDS)) and not any(c in nxt.flags for c in "otp")


def _place_surname(nxt: TokenInfo, mode: str) -> bool:
    """A word in "-lı" of six letters or more, capitalised where the line has casing, that the
    lists know as nothing but a village (or not at all), made of a place or a name ("Akpınar",
    "Kozan", "Tezcan"; not a common word's "görüntülü")."""
    if not (nxt.key.endswith(("li", "lu")) and len(nxt.key) >= 6 and nxt.flags.strip("v") == ""):
        return False
    stem = lexicon_flags().get(nxt.key[:-2], "")
    return any(c in stem for c in "psg") and (mode != "mixed" or nxt.shape == "C") \
        and nxt.key not in NOT_NAMES and nxt.key not in HEADINGS


_HARD = {"d": "t", "b": "p", "g": "k"}  # a stem's last consonant, softened before a vowel (folded: ç is c)


def _possessed_word(key: str) -> bool:
    """A folded word is a common word with the third person's possessive ("orucu": oruç,
    "ramazan orucu"; "kapisi": kapı), though a surname list holds it too."""
    common = common_words()
    for ending in ("si", "su", "i", "u"):
        stem = key.removesuffix(ending)
        if stem != key and len(stem) >= 3 and (stem in common or stem[:-1] + _HARD.get(stem[-1], stem[-1]) in common):
            return True
    return False
