"""KVKK Article 6 special categories of personal data, in Turkish and English, when tied to a
person: health, religion or belief, ethnic origin, political opinion, union membership, sexual
life, criminal records, biometric and genetic data.

A category term counts only with a person nearby in the same sentence: a name from the
gazetteer, a role noun ("hastamız", "çalışanımız", "our patient"), or the first person ("ben",
"benim", "diyabetim", "I have", "my"). "HIV nasıl bulaşır?" or "What is Ramadan?" is a general
question, not personal data, and stays routable.
"""

from __future__ import annotations

import re

from policies.addresses import person_name_spans

_TERMS = {
    "health": "hiv|aids|diyabet|şeker hastası|kanser|lösemi|depresyon|şizofreni|bipolar|epilepsi|hepatit|"
              "tüberküloz|verem|kemoterapi|diyaliz|alzheimer|parkinson|otizm|antidepresan|psikiyatrik|"
              "cancer|diabetes|diabetic|depression|schizophrenia|chemotherapy|dialysis|epilepsy|hepatitis",
    "religion": "müslüman|hristiyan|hıristiyan|yahudi|alevi|sünni|ateist|budist|yehova şahidi|deist|"
                "muslim|christian|jewish|atheist|buddhist|hindu|catholic|protestant",
    "ethnicity": "=kürt|ermeni|süryani|çerkez|etnik kökeni|kurdish|armenian|ethnic origin",
    "politics": "parti üyesi|partisi üyesi|partili|oy verdi|oy verdim|oy vereceğim|siyasi görüşü|"
                "political views|voted for|party member",
    "union": "sendika üyesi|sendikalı|sendikaya üye|union member|trade union",
    "sexual_life": "eşcinsel|lezbiyen|biseksüel|transseksüel|cinsel yönelimi|homosexual|lesbian|bisexual|"
                   "sexual orientation",
    "criminal": "sabıka kaydı|sabıkalı|adli sicil kaydı|hükümlü|hapis cezası aldı|cezaevinde|"
                "criminal record|convicted|prison sentence",
    "biometric": "parmak izi|yüz tanıma verisi|retina taraması|iris taraması|biyometrik veri|"
                 "fingerprint|face scan|biometric data",
    "genetic": "dna testi|genetik test|gen testi|brca|genetic test|dna test",
}
SPECIAL_KINDS = tuple(_TERMS)
_LOOSE = {"ı": "[ıiIİ]", "i": "[iıİI]", "ş": "[şsŞS]", "s": "[sşSŞ]", "ğ": "[ğgĞG]", "ü": "[üuÜU]",
          "ö": "[öoÖO]", "ç": "[çcÇC]", " ": r"[ \t]+"}


def _loose(term: str) -> str:
    """A term whose Turkish letters also match their dotless / accentless forms; "=" before a
    term keeps its letters exact ("Kürt" is an ethnic origin, "Kurt" a common surname)."""
    if term.startswith("="):
        return "".join(f"[{c}{c.upper()}]" if c.isalpha() else re.escape(c) for c in term[1:])
    return "".join(_LOOSE.get(c, re.escape(c)) for c in term)


_CATEGORY = re.compile(
    "|".join(f"(?P<{k}>(?<!\\w)(?:{'|'.join(_loose(t) for t in v.split('|'))}))" for k, v in _TERMS.items()),
    re.IGNORECASE,
)
_SUFFIX_1P = re.compile(r"['’]?\w{0,8}?(?:y?[ıiuü]m|y?[ıiuü]z)(?!\w)")  # diyabetim, hastasıyım, Kürdüm
_ROLE = re.compile(
    r"(?<!\w)(?:hastam[ıi]z|hastan[ıi]z|çal[ıi]şan[ıi]m[ıi]z|personelimiz|müşterimiz|öğrencimiz|üyemiz|"
    r"danışan[ıi]m[ıi]z|eşim|annem|babam|oğlum|kızım|kardeşim|arkadaşım|komşum|ben|benim|bende|"
    r"our patient|our employee|our client|my wife|my husband|my son|my daughter|my mother|my father|"
    r"the patient [A-Z]|employee [A-Z])(?!\w)",
    re.IGNORECASE,
)
_EN_1P = re.compile(r"(?<!\w)(?:I am|I'm|I have|I've been|I was|my|diagnosed)(?:[ \t]+[\w'-]+){0,2}[ \t]*\Z",
                    re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?\n](?:[ \t]|\Z)")


def find_special(text: str, limit: int = 16) -> list[tuple[str, int, int]]:
    """(category, start, end) for every special-category term tied to a person."""
    out: list[tuple[str, int, int]] = []
    for m in _CATEGORY.finditer(text):
        kind = m.lastgroup or "health"
        if _tied_to_person(text, m.start(), m.end()):
            out.append((kind, m.start(), m.end()))
            if len(out) >= limit:
                break
    return out


def _tied_to_person(text: str, start: int, end: int) -> bool:
    if _SUFFIX_1P.match(text, end):
        return True
    lo, hi = _sentence(text, start, end)
    if _EN_1P.search(text, max(lo, start - 40), start):
        return True
    if _ROLE.search(text, lo, hi):
        return True
    return bool(person_name_spans(text, lo, hi))


def _sentence(text: str, start: int, end: int) -> tuple[int, int]:
    """The sentence around [start, end), at most 100 characters either side."""
    lo = max(0, start - 100)
    for m in _SENTENCE_END.finditer(text, lo, start):
        lo = m.end()
    hi_m = _SENTENCE_END.search(text, end, min(len(text), end + 100))
    return lo, hi_m.start() + 1 if hi_m else min(len(text), end + 100)
