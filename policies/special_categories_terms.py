"""The KVKK Article 6 category terms (Turkish and English), shared by the detector and the
trigger pass. Turkish letters are matched loosely (dotless/accentless forms too)."""

from __future__ import annotations

import re

TERMS = {
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
_LOOSE = {"ı": "[ıiIİ]", "i": "[iıİI]", "ş": "[şsŞS]", "s": "[sşSŞ]", "ğ": "[ğgĞG]", "ü": "[üuÜU]",
          "ö": "[öoÖO]", "ç": "[çcÇC]", " ": r"[ \t]+"}


def loose(term: str) -> str:
    """A term whose Turkish letters also match their dotless / accentless forms; "=" before a
    term keeps its letters exact ("Kürt" is an ethnic origin, "Kurt" a common surname)."""
    if term.startswith("="):
        return "".join(f"[{c}{c.upper()}]" if c.isalpha() else re.escape(c) for c in term[1:])
    return "".join(_LOOSE.get(c, re.escape(c)) for c in term)



TERM_ALTERNATION = "|".join(loose(t) for v in TERMS.values() for t in v.split("|"))
