"""Bare offence names as criminal-record data: only in a record's shape.

"Hırsızlık", "dolandırıcılık" or "yağma" alone is as often a news item, a leaflet's warning or
an insurance cover ("hırsızlık sigortası") as anyone's record, so offences.txt's bare names
count only where a record says them of someone: with a sentence's length after them in the
same line ("1) ÖMER DİKİCİ (HIRSIZLIK, 4 YIL 2 AY)", "dolandırıcılık tan 3 yıl 4 ay aldı",
"robbery, 6 years") or after a charge's label ("SUÇ: NİTELİKLİ HIRSIZLIK", "Offence: theft").
Whether the record is a person's is `person_links`' question, as for every term.
"""

from __future__ import annotations

import re

from fairgate.policies.detection.special_categories_terms import charged_only

# a sentence's length right after the offence, as a record's field ("HIRSIZLIK, 4 YIL 2 AY)",
# "YAĞMA / 6 YIL 8 AY —"), or a word or two later with a verb of sentencing or serving ("dolandırıcılık
# tan 3 yıl 4 ay aldı", "hırsızlıktan 2 yıl 6 ay hapis"); not any span of time ("mağduru oldu, 2 ay
# önce", "sigortası için 3 yıl taksit"), nor a year ("2019 yılında": one or two digits)
_LENGTH = r"(?<!\d)[0-9]{1,2}[ \t]*(?:y[ıi]l|sene|years?)(?:[ \t]+[0-9]{1,2}[ \t]*ay)?|(?<!\d)[0-9]{1,2}[ \t]*(?:ay|months?)"
_SENTENCE_AFTER = re.compile(  # (after the offence's case ending: "HIRSIZLIKTAN")
    rf"\w*(?:[ \t]*[,/—–-]?[ \t]*(?:{_LENGTH})(?:[ \t]*(?:[)\n,;|/—–-]|\Z)|[ \t]+(?:hapis|hapse|ceza|prison))"
    rf"|(?:[ \t]+[^\W\d_]+){{0,2}}[ \t]+(?:{_LENGTH})[ \t]+(?:ald|alm|ver|yat|hapis|hapse|ceza|mahk|h[üu]k[üu]m|prison))",
    re.IGNORECASE)
# a charge's label just before: "SUÇ:", "Suçu:", "suç türü:", "Offence:", "Charge:"
_LABEL_BEFORE = re.compile(r"(?<!\w)(?:su[çc]u?(?:[ \t]+t[üu]r[üu])?|offen[cs]e|charge)[ \t]*[:=][ \t]*"
                           r"(?:[^\W\d_]+[ \t]+)?\Z", re.IGNORECASE)


def unsentenced_offence(text: str, start: int, end: int) -> bool:
    """The term at text[start:end] is a bare offence's name with no sentence's length after it
    and no charge's label before it: not a record."""
    if not charged_only(text, start, end):
        return False
    return _SENTENCE_AFTER.match(text, end) is None and _LABEL_BEFORE.search(text, max(0, start - 40), start) is None
