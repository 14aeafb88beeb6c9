"""Names that machine formats place by position, with no label before them: an HL7 message's
patient segment ("PID|1||26381094766^^^TCKN||KALKAN^SEVİM||19790523|F|", the name is PID-5,
family name then given names), a travel document's machine-readable zone (a passport's first
line "P<TURYAZICI<<MELEK<NUR<<<...", an ID card's name line "KARACA<<AYSE<FATMA<<<...") and an
airline booking's passenger (the name element "1.KAYA/ELIFMRS", and the travel document an
"SSR DOCS" line gives: "SSR DOCS TK HK1/P/TUR/U12345678/TUR/05MAY90/F/01JAN32/KAYA/ELIF", whose
document number and birth date `find_booking_documents` reads too), and a driving licence's
numbered fields as the card prints them (the EU model's "1." family name, "2." given names,
"3." birth date and place: "1. KAYA\n2. ELİF NUR\n3. 05.05.1990 RİZE", birth date read too).

The trigger pass finds both (`triggers`, the "machine" family); here each is read into its
family-name and given-name spans. A fixture's stand-in ("TEST^HASTA", "DOE<<JOHN") is no one.
"""

from __future__ import annotations

import re

from fairgate.policies.detection.gazetteer import fold_key

# (RE2, in the trigger pass) an HL7 patient segment up to its name field (four fields after
# "PID|"), or a line that is an MRZ name (a family name, "<<", given names, then the filler '<')
MACHINE_LINES = (r"pid\|(?:[^|\n]*\|){4}"
                 r"|(?:^|\n)[a-z<]{0,5}[a-z]{2,}(?:<[a-z]+)*<<[a-z]+(?:<[a-z]+)*<"
                 # a booking's SSR DOCS line up to its fields, or a name element at a line's start
                 r"|ssr[ \t]+docs[ \t]+[a-z0-9]{2}[ \t]+[a-z]{2}[0-9]{1,3}[ \t/]"
                 r"|(?:^|\n)[0-9]{1,2}\.[a-z]{2,}/[a-z]{2,}(?:mrs|mr|ms|mstr|miss)(?:[ \t\n]|$)"
                 # a licence's first three numbered fields: two lines of words, then a date
                 r"|(?:^|\n)1\.[ \t]+\pL[^\n]{1,60}\n2\.[ \t]+\pL[^\n]{1,60}\n3\.[ \t]+[0-9]")
# PID-5: components split by '^' (family, given, middle, ...), each letters and spaces or hyphens
_PID_NAME = re.compile(r"([^\W\d_]{2,}(?:[ \-'][^\W\d_]+)*)(?:\^([^\W\d_]{2,}(?:[ \-'][^\W\d_]+)*))?(?=[\^|~\n]|\Z)")
# an MRZ name: a family name's words joined by '<', "<<", the given names joined by '<'; the
# passport's first line opens with the document code, its type and the issuing state ("P<TUR")
_MRZ_NAME = re.compile(r"([A-Z]{2,}(?:<[A-Z]+)*)<<([A-Z]+(?:<[A-Z]+)*)<")
_MRZ_STATE = re.compile(r"P[A-Z<][A-Z<]{3}")
# SSR DOCS' fields after the status code: document type, issuing state, document number,
# nationality, birth date, sex, expiry, family name, given names (IATA's order; uppercase)
_DOCS = re.compile(r"([A-Z])/[A-Z]{2,3}/([A-Z0-9]{5,15})/[A-Z]{0,3}/([0-9]{2}[A-Z]{3}[0-9]{2})/(?:[MFUX]I?)/"
                   r"(?:[0-9]{2}[A-Z]{3}[0-9]{2})?/([A-Z]{2,}(?:[ \-][A-Z]+)*)/([A-Z]{2,}(?:[ \-][A-Z]+)*?)(?=[ \t]*(?:[/\-]|\n|\Z))")
# a name element: family name, '/', the given names with the title glued on ("1.AKSOY/CANMR")
_PNR_NAME = re.compile(r"[0-9]{1,2}\.([A-Z]{2,})/([A-Z]{2,}?)(?:MRS|MR|MS|MSTR|MISS)(?=[ \t\n]|\Z)")
# a licence's fields 1 (family name) and 2 (given names), each its line's words, field 3's
# birth date and place, and then one of the fields only a licence letters ("4a." to "4d."): a
# numbered agenda or list with a date on its third line is no card
_LICENCE = re.compile(r"1\.[ \t]+([^\W\d_]{2,}(?:[ \-'][^\W\d_]+){0,3})[ \t]*\n"
                      r"2\.[ \t]+([^\W\d_]{2,}(?:[ \-'][^\W\d_]+){0,3})[ \t]*\n"
                      r"3\.[ \t]+([0-9]{2}[./][0-9]{2}[./][0-9]{4})[ \t]+[^\W\d_][^\n]*\n4[a-dA-D]\.")
_PLACEHOLDERS = frozenset(("doe", "test", "ornek", "deneme", "sample", "example", "dummy", "hasta", "patient", "xxx"))


def find_machine_names(text: str, hits: list[tuple[int, int]], limit: int = 8) -> list[tuple[int, int]]:
    """(start, end) of the family names and the given names in HL7 name fields, MRZ name lines
    and bookings' passengers (`hits`: where the trigger pass saw one; an HL7 hit ends where PID-5
    starts, an SSR DOCS hit where its fields do)."""
    out: list[tuple[int, int]] = []
    for start, end in hits[:limit]:
        m, groups = _name_at(text, start, end)
        if m is None or _PLACEHOLDERS.intersection(
                fold_key(" ".join(m.group(g) or "" for g in groups)).replace("^", " ").replace("<", " ").split()):
            continue
        out += [m.span(g) for g in groups if m.start(g) != -1]
    return out


def _name_at(text: str, start: int, end: int) -> tuple[re.Match[str] | None, tuple[int, int]]:
    """The match of the name at a hit, and its family-name and given-name groups."""
    if text[start : start + 4].upper() == "PID|":
        return _PID_NAME.match(text, end), (1, 2)
    if text[start : start + 3].upper() == "SSR":
        return _DOCS.match(text, end), (4, 5)
    lo = start + (text[start] == "\n")
    if text.startswith("1.", lo) and (licence := _LICENCE.match(text, lo)) is not None:
        return licence, (1, 2)
    if text[lo].isdigit():
        return _PNR_NAME.match(text, lo), (1, 2)
    line_end = text.find("\n", lo)
    # the passport's line is 44 characters; "P<" opens it whatever its length after OCR
    if _MRZ_STATE.match(text, lo) and (text.startswith("P<", lo) or (line_end if line_end != -1 else len(text)) - lo == 44):
        lo += 5
    return _MRZ_NAME.match(text, lo), (1, 2)


def find_booking_documents(text: str, hits: list[tuple[int, int]], limit: int = 8) -> list[tuple[str, int, int]]:
    """("passport", ...) for a passport's number and ("birth_date", ...) for the birth date in
    each SSR DOCS line among `hits` (a booking's travel document: its fields are positional),
    and a driving licence's birth date (its field 3)."""
    out: list[tuple[str, int, int]] = []
    for start, end in hits[:limit]:
        lo = start + (text[start] == "\n")
        if text.startswith("1.", lo) and (licence := _LICENCE.match(text, lo)) is not None:
            out.append(("birth_date", *licence.span(3)))
        if text[start : start + 3].upper() != "SSR" or (m := _DOCS.match(text, end)) is None:
            continue
        out += [("passport", *m.span(2))] if m.group(1) == "P" else []
        out.append(("birth_date", *m.span(3)))
    return out
