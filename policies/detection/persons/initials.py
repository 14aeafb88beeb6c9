"""Initials standing for a person: a record's or a note's subject by the first letters of their
names ("Hasta S.K.", "Danışan: R.E.", "Müşteki: S.Ç. (24)", "— I.K., Eskişehir"). In a line of
lower case they are lower case too ("seans 6 — d.ö. (32, k)", "hasta s.k., 34 y"), read by the
same cues; a state's or a firm's abbreviation ("T.C.", "A.Ş.", "m.ö.") never is a person's."""

from __future__ import annotations

import re

from fairgate.policies.detection.gazetteer import fold_key
from fairgate.policies.detection.person_links import person_word
from fairgate.policies.detection.persons.features import CUES, Doc
from fairgate.policies.detection.persons.lexicon import lexicon_flags

# a record's person by initials: an age after them ("R.E. (K, 31)", "S.K., 34 y", "D.K. (28)")
_INITIALS = re.compile(r"(?<![\w.])[A-ZÇĞİÖŞÜ]\.[ \t]?[A-ZÇĞİÖŞÜ]\.(?:[ \t]?[A-ZÇĞİÖŞÜ]\.)?(?!\w)")
# (the same in a line of lower case)
# (a dot first: the search skips to each dot at once; the letter before it is checked after)
_LOWER_INITIALS = re.compile(r"\.[ \t]?[a-zçğıöşü]\.(?:[ \t]?[a-zçğıöşü]\.)?(?!\w)")
_AGE_AFTER = re.compile(r"[ \t]*(?:\([ \t]*(?:[KEkeMFmf][ \t]*,[ \t]*)?[0-9]{1,2}\b|,[ \t]*[0-9]{1,2}[ \t]*(?:y\b|ya[şs]))")
# or an age before them, as news gives it ("34 yaşındaki R.K.", "29 yasindaki s.t.")
_AGE_BEFORE = re.compile(r"(?<![0-9])[0-9]{1,2}[ \t]+ya[şs][ıi]ndaki[ \t]+\Z", re.IGNORECASE)
_CUE_BEFORE = re.compile(r"([^\W\d_]+)[ \t]*[:(]?[ \t]*\Z")
# or a signature: after a dash (normalised to "-") and a unit ("İK /"), before the line's end or a town
# ("— I.K., Eskişehir"); never a state's or a firm's abbreviation; or after a label ("baş harfleri: Ş.Y.")
_SIGNED_BEFORE = re.compile(r"(?:(?:^|\n)[ \t]*(?:[—–-][ \t]*)?|[ \t][—–-][ \t]*)(?:[^\W\d_]{1,8}[ \t]*/[ \t]*)?\Z")
_SIGN_END = re.compile(r"[ \t]*(?:\n|\Z|,[ \t]*[A-ZÇĞİÖŞÜ][^\W\d_]+[ \t]*(?:\n|\Z))")
_NOT_INITIALS, _INITIALS_LABEL = frozenset("TC AŞ MÖ MS AB ABD KKTC BM SS".split()), frozenset(("harfleri", "initials"))


def initials(doc: Doc, cands: list[int]) -> list[tuple[int, int]]:
    """(start, end) of initials standing for a person ("Hasta S.K.", "Danışan: R.E.", "Müşteki:
    S.Ç. (24)"): two or three initials after a role or relation word, or with an age after
    them. Read only where the tokens hold an initial, or in a text with a line of lower case."""
    infos = doc.infos()
    # (a line of capitals scores no initial, so its sign-off's "— İK / N.Ö." is looked for in all its tokens)
    capitals = any(infos[i].shape == "I" for i in cands) or ("caps" in doc.modes() and any(f.shape == "I" for f in infos))
    if not capitals and "lower" not in doc.modes():
        return []
    text, out = doc.text, []
    found = [m.span() for m in _INITIALS.finditer(text)] if capitals else []
    if "lower" in doc.modes():
        found += [(m.start() - 1, m.end()) for m in _LOWER_INITIALS.finditer(text) if _lower_initial(text, m.start())]
    for start, end in found:
        key = fold_key(cue.group(1)) if (cue := _CUE_BEFORE.search(text, max(0, start - 30), start)) else ""
        cued = (key and (key in CUES or key in _INITIALS_LABEL or person_word(key))) or _AGE_AFTER.match(text, end) \
            or _AGE_BEFORE.search(text, max(0, start - 20), start) or _abbreviates_name_before(text, start, end)
        signed = _SIGNED_BEFORE.search(text, max(0, start - 12), start) and _SIGN_END.match(text, end)
        if (cued or signed) and re.sub(r"[. \t]", "", text[start:end]).upper() not in _NOT_INITIALS:  # not "T.C. Ziraat"
            out.append((start, end))
    return out


# a name's words right before an opening parenthesis ("Tsegaye Bekele (T.B.)")
_NAMED_BEFORE = re.compile(r"((?:[A-ZÇĞİÖŞÜ][^\W\d_]+[ \t]+){1,2}[A-ZÇĞİÖŞÜ][^\W\d_]+)[ \t]*\([ \t]*\Z")


def _abbreviates_name_before(text: str, start: int, end: int) -> bool:
    """The initials, in parentheses, are the first letters of the capitalised words before them,
    no organisation's or common word among them: the note's short form of the name it has just
    given ("Tsegaye Bekele (T.B.), d. 1992"; not "Kültür Merkezi (K.M.)")."""
    named = _NAMED_BEFORE.search(text, max(0, start - 60), start)
    letters = re.sub(r"[. \t]", "", text[start:end])
    words = named.group(1).split()[-len(letters):] if named is not None else []
    flags = lexicon_flags()
    return [w[0] for w in words] == list(letters) and not any(
        "o" in (f := flags.get(fold_key(w), "")) or ("c" in f and "g" not in f and "s" not in f) for w in words)


def _lower_initial(text: str, dot: int) -> bool:
    """The dot at `dot` follows one lower-case letter that no letter, digit or dot stands before
    ("s.k.", not "abc.d."), in a line with no capital letter."""
    if dot < 1 or not text[dot - 1].islower() or (dot >= 2 and (text[dot - 2].isalnum() or text[dot - 2] in "._")):
        return False
    end = text.find("\n", dot)
    line = text[text.rfind("\n", 0, dot) + 1 : len(text) if end == -1 else end]
    return line == line.lower()
