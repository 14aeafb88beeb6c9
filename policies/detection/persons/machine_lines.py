"""Names that machine formats place by position, with no label before them: an HL7 message's
patient segment ("PID|1||26381094766^^^TCKN||KALKAN^SEVİM||19790523|F|", the name is PID-5,
family name then given names) and a travel document's machine-readable zone (a passport's first
line "P<TURYAZICI<<MELEK<NUR<<<...", an ID card's name line "KARACA<<AYSE<FATMA<<<...").

The trigger pass finds both (`triggers`, the "machine" family); here each is read into its
family-name and given-name spans. A fixture's stand-in ("TEST^HASTA", "DOE<<JOHN") is no one.
"""

from __future__ import annotations

import re

from fairgate.policies.detection.gazetteer import fold_key

# (RE2, in the trigger pass) an HL7 patient segment up to its name field (four fields after
# "PID|"), or a line that is an MRZ name (a family name, "<<", given names, then the filler '<')
MACHINE_LINES = (r"pid\|(?:[^|\n]*\|){4}"
                 r"|(?:^|\n)[a-z<]{0,5}[a-z]{2,}(?:<[a-z]+)*<<[a-z]+(?:<[a-z]+)*<")
# PID-5: components split by '^' (family, given, middle, ...), each letters and spaces or hyphens
_PID_NAME = re.compile(r"([^\W\d_]{2,}(?:[ \-'][^\W\d_]+)*)(?:\^([^\W\d_]{2,}(?:[ \-'][^\W\d_]+)*))?(?=[\^|~\n]|\Z)")
# an MRZ name: a family name's words joined by '<', "<<", the given names joined by '<'; the
# passport's first line opens with the document code, its type and the issuing state ("P<TUR")
_MRZ_NAME = re.compile(r"([A-Z]{2,}(?:<[A-Z]+)*)<<([A-Z]+(?:<[A-Z]+)*)<")
_MRZ_STATE = re.compile(r"P[A-Z<][A-Z<]{3}")
_PLACEHOLDERS = frozenset(("doe", "test", "ornek", "deneme", "sample", "example", "dummy", "hasta", "patient", "xxx"))


def find_machine_names(text: str, hits: list[tuple[int, int]], limit: int = 8) -> list[tuple[int, int]]:
    """(start, end) of the family names and the given names in HL7 name fields and MRZ name
    lines (`hits`: where the trigger pass saw one; an HL7 hit ends where PID-5 starts)."""
    out: list[tuple[int, int]] = []
    for start, end in hits[:limit]:
        if text[start : start + 4].upper() == "PID|":
            m = _PID_NAME.match(text, end)
        else:
            lo = start + (text[start] == "\n")
            line_end = text.find("\n", lo)
            # the passport's line is 44 characters; "P<" opens it whatever its length after OCR
            if _MRZ_STATE.match(text, lo) and (text.startswith("P<", lo) or (line_end if line_end != -1 else len(text)) - lo == 44):
                lo += 5
            m = _MRZ_NAME.match(text, lo)
        if m is None or _PLACEHOLDERS.intersection(fold_key(m.group()).replace("^", " ").replace("<", " ").split()):
            continue
        out += [m.span(g) for g in (1, 2) if m.start(g) != -1]
    return out
