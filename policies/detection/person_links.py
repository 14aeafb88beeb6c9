"""Whether a piece of text is about a particular person: the test a KVKK special-category term
must pass to be personal data ("HIV nasıl bulaşır?" is a general question; "hastamız HIV
pozitif" is not).

A term is tied to a person when, in its sentence, there is a person's name, a role or relation
("hastamız", "eşim", "kızınız", "şube müdürümüz", "3. kattaki muhasebe şefi", "adam"/"kadın"),
a third person's "olduğu(nu)", or the first person ("diyabetim", "yaşıyorum", "birlikte olduk");
or a name stands in the same record (a form's "Hasta: ..." line three lines up, or earlier on
the same line when the term is a form's field: "Sigortalı: X ... Tanı: bel fıtığı").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from fairgate.policies.detection.addresses import person_name_spans

_FOLD = str.maketrans({"ı": "[ıi]", "ş": "[şs]", "ğ": "[ğg]", "ü": "[üu]", "ö": "[öo]", "ç": "[çc]"})
_WORDS = (
    "hastamız hastanız hasta: hastanın hastaya çalışanımız personelimiz müşterimiz öğrencimiz üyemiz danışan "
    "danışanım danışanımız eşim eşi eşiniz annem annesi anneniz babam babası babanız oğlum oğlu oğlunuz kızım "
    "kızı kızınız kardeşim kardeşi arkadaşım arkadaşımız komşum komşumuz kayınvalidem kayınpederim yeğenim "
    "teyzem dayım amcam halam ablam abim çocuğum çocuğunuz velimiz ben benim bende kendisi kendisinin "
    "sigortalı sanık sanığın davacı davalı aday adayın şüpheli hükümlü veli velisi öğrenci personel çalışan "
    "işçi kiracı başvuran müşteri adam kadın olduğunu olduğu olduğundan olmadığını olduğumu"
)
# our X ("şube müdürümüz"), a role with a place ("kattaki", "şubesinin"), a first-person verb
_PATTERNS = (
    r"\w{3,}(?:[ıi]m[ıi]z|[uü]m[uü]z)\w{0,4}", r"\w+(?:daki|deki|taki|teki)", r"\w+(?:sinin|sının|sunun|sünün)",
    r"\w+(?:[ıiuü]yorum|[ıiuü]yoruz|d[ıiuü]m|t[ıiuü]m|d[ıiuü]k|t[ıiuü]k|m[ıi]ş[ıi]m|ac[ae]ğ[ıi]m)",
    "our patient", "our employee", "our client", "my wife", "my husband", "my son", "my daughter",
    "my mother", "my father",
)
_ROLE = re.compile("(?<!\\w)(?:" + "|".join([*(w.translate(_FOLD) for w in _WORDS.split()), *_PATTERNS])
                   + ")(?!\\w)", re.IGNORECASE)
_SUFFIX_1P = re.compile(r"['’]?\w{0,8}?(?:[ \t]+\w{2,12}?)?(?:y?[ıiuü]m|y?[ıiuü]z)(?!\w)")  # diyabetim, seansım
_EN_1P = re.compile(r"(?<!\w)(?:I am|I'm|I have|I've been|I was|my|diagnosed)(?:[ \t]+[\w'-]+){0,2}[ \t]*\Z",
                    re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?\n](?:[ \t]|\Z)")


def tied_to_person(text: str, start: int, end: int, names: Sequence[tuple[int, int]]) -> bool:
    """Whether the term at text[start:end] is about a person (see the module's docstring);
    `names`: person names found in the text."""
    if _SUFFIX_1P.match(text, end):
        return True
    lo, hi = sentence(text, start, end)
    if _named_nearby(text, start, end, (lo, hi), names):
        return True
    if _EN_1P.search(text, max(lo, start - 40), start):
        return True
    if _ROLE.search(text, lo, hi):
        return True
    return bool(person_name_spans(text, lo, hi))


def _named_nearby(text: str, start: int, end: int, sent: tuple[int, int], names: Sequence[tuple[int, int]]) -> bool:
    lo, hi = sent
    line_lo, line_hi = text.rfind("\n", 0, start) + 1, _line_end(text, end)
    rec_lo, rec_hi = _record(text, start, end)
    # "Tedavi talebi: ..., tanı bel fıtığı" in a one-line form (a question is general)
    form_field = ":" in text[lo:start] and text[hi - 1 : hi] != "?"
    for s, e in names:
        if lo <= s and e <= hi:
            return True
        if rec_lo <= s and e <= rec_hi and not line_lo <= s < line_hi:
            return True  # another line of the same record
        if line_lo <= s and e <= lo and start - s <= 200 and form_field:
            return True  # an earlier sentence of the same one-line form
    return False


def sentence(text: str, start: int, end: int) -> tuple[int, int]:
    """The sentence around [start, end), at most 100 characters either side."""
    lo = max(0, start - 100)
    for m in _SENTENCE_END.finditer(text, lo, start):
        lo = m.end()
    hi_m = _SENTENCE_END.search(text, end, min(len(text), end + 100))
    return lo, hi_m.start() + 1 if hi_m else min(len(text), end + 100)


def _line_end(text: str, end: int) -> int:
    nl = text.find("\n", end)
    return len(text) if nl == -1 else nl


def _record(text: str, start: int, end: int) -> tuple[int, int]:
    """The record around [start, end): up to three lines either side, not past a blank line."""
    lo = text.rfind("\n", 0, start)
    for _ in range(3):
        if lo <= 0 or text[lo - 1] == "\n":
            break
        lo = text.rfind("\n", 0, lo)
    hi = _line_end(text, end)
    for _ in range(3):
        if hi >= len(text) - 1 or text[hi + 1] == "\n":
            break
        hi = _line_end(text, hi + 1)
    return max(0, lo + 1, start - 400), min(hi, end + 400)
