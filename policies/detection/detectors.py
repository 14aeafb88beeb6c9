"""Every built-in detector, run in order over normalised text (see `sensitivity`).

Order matters only for overlaps: e-mails and IBAN-shaped strings are found first, and their
spans are not re-read as numbers. Encoded runs (base64, hex, URL, HTML entities, number words)
are decoded once and scanned again; a finding there covers the whole run.
"""

from __future__ import annotations

import re

from fairgate.policies.detection.addresses import find_person_addresses
from fairgate.policies.detection.checksums import tckn_valid
from fairgate.policies.detection.digit_chains import MIN_CHAIN_DIGITS, scan_numbers
from fairgate.policies.detection.document_numbers import document_numbers
from fairgate.policies.detection.emails import find_emails
from fairgate.policies.detection.encodings import decoded_runs
from fairgate.policies.detection.iban import scan_foreign_ibans
from fairgate.policies.detection.identifiers import (
    dates_after_names,
    dates_after_passports,
    find_identifiers,
    vkn_spans,
)
from fairgate.policies.detection.persons.columns import find_column_names, place_cells
from fairgate.policies.detection.persons.fields import find_field_names
from fairgate.policies.detection.persons.machine_lines import (
    find_booking_documents,
    find_machine_names,
)
from fairgate.policies.detection.persons.names import find_person_names
from fairgate.policies.detection.postal import find_postal_addresses
from fairgate.policies.detection.records import find_column_values, find_registry_numbers
from fairgate.policies.detection.special_categories import (
    SPECIAL_KINDS,
    a_people,
    find_special,
    names_a_term,
)
from fairgate.policies.detection.textnorm import MESSAGE_JOIN, normalize
from fairgate.policies.detection.triggers import find_triggers

STRUCTURED_KINDS = ("tckn", "iban", "phone", "card", "email")
IDENTIFIER_KINDS = ("vkn", "passport", "plate", "birth_date", "sgk")
# "unscannable": a text with thousands of triggers (not prose), kept local without a full scan
DETECTOR_KINDS = (*STRUCTURED_KINDS, *IDENTIFIER_KINDS, "person_name", "person_address", *SPECIAL_KINDS,
                  "unscannable", "pattern", "keyword")
MAX_FINDINGS = 64  # one finding keeps a request local; more only cost time
Span = tuple[str, int, int]
_SHORT_RUN = re.compile(r"[0-9](?:[ .\-]?[0-9]){1,9}")


def detect(text: str, depth: int = 0) -> list[Span]:
    """(kind, start, end) findings on normalised `text`. `depth` > 0: a decoded run, not
    decoded again."""
    hits, overflow = find_triggers(text)
    if overflow:  # not prose: scanning every trigger would cost too much; keep it local
        return [("unscannable", 0, len(text))]
    if not any(hits.values()) and sum(map(text.count, "0123456789")) < MIN_CHAIN_DIGITS:
        # most prompts: no trigger and no digit chain, so every detector but the names' reads
        # nothing (each works only at its triggers, the numeric ones on 10+ digits)
        tagged = find_person_names(text) if depth == 0 else []
        if tagged is None:
            return [("unscannable", 0, len(text))]
        return [("person_name", s, e) for s, e in tagged]
    out: list[Span] = [("email", s, e) for s, e in find_emails(text, hits["email"], MAX_FINDINGS)]
    blocked = [(s, e) for _, s, e in out]

    def foreign_iban(start: int, end: int, valid: bool) -> None:
        blocked.append((start, end))  # a bad IBAN's digits are not a card either
        if valid:
            out.append(("iban", start, end))

    scan_foreign_ibans(text, foreign_iban, hits["iban"])
    for start, end, valid in vkn_spans(text, hits["ident"]):
        blocked.append((start, end))
        out += [("vkn", start, end)] if valid else []
    blocked = sorted(blocked + document_numbers(text))  # an invoice's number, a GLN, an HL7 time stamp
    scan_numbers(text, blocked, lambda kind, s, e: out.append((kind, s, e)), MAX_FINDINGS)
    if MESSAGE_JOIN in text:
        out += split_tckns(text)
    out += find_identifiers(text, hits["ident"]) + find_booking_documents(text, hits["machine"])  # (same spans: one finding)
    by_column = find_registry_numbers(text, hits["registry"])
    by_column += find_column_values(text, sorted(hits["ident"] + hits["registry"]))
    if by_column:  # a number after "SGK sicil no" or under a `vkn` column is that, not a phone or card
        out = [f for f in out if f[0] not in ("phone", "card") or not any(s < f[2] and f[1] < e for _, s, e in by_column)]
        out += by_column
    tagged = find_person_names(text) if depth == 0 else []
    if tagged is None:  # far more capitalised words than prose has: keep it local unscanned
        return [*out, ("unscannable", 0, len(text))]
    by_label = find_field_names(text, hits["field"]) + find_machine_names(text, hits["machine"])
    if hits["column"]:
        in_columns, headers = find_column_names(text, hits["column"])
        if headers:  # a table's header names columns ("ad;soyad;brüt"), not people; nor a place column's cells
            tagged = [n for n in tagged if not any(s <= n[0] and n[1] <= e for s, e in headers + place_cells(text, headers))]
        by_label += in_columns
    # a field's whole value over the tagger's part of it ("guest=Sevgi Nur Ilgaz": not just "Nur Ilgaz")
    tagged = [n for n in tagged if not any(s <= n[0] and n[1] <= e and (s, e) != n for s, e in by_label)]
    tagged += [f for f in by_label if not any(s < f[1] and f[0] < e for s, e in tagged)]
    # a name inside an e-mail address, IBAN or plate ("06 BRK 72") is that finding's; a people's name alone an origin
    taken = blocked + _plates(out)
    names = [n for n in tagged if not any(s < n[1] and n[0] < e for s, e in taken)
             and not (hits["special"] and (a_people(text, n, hits["special"]) or names_a_term(text, n, hits["special"])))]
    out += [("person_name", s, e) for s, e in names] + dates_after_names(text, names, out) + dates_after_passports(text, out)
    out += find_person_addresses(text, hits["street"], names)
    out += find_postal_addresses(text, sorted(hits["street"] + hits["postal"]), names)
    out += find_special(text, hits["special"], names + [(s, e) for k, s, e in out if k == "tckn"])
    if depth == 0 and len(out) < MAX_FINDINGS:
        for start, end, decoded in decoded_runs(text, hits["encoded"], hits["words"]):
            inner = detect(normalize(decoded).text, depth + 1)
            out += [(kind, start, end) for kind in {k for k, _, _ in inner}]
    return out


def _plates(found: list[Span]) -> list[tuple[int, int]]:
    return [(s, e) for kind, s, e in found if kind == "plate"]


def split_tckns(text: str) -> list[Span]:
    """A TCKN sent in two messages with words between: the last short digit run before a
    message boundary and the first after it, read as one number."""
    out: list[Span] = []
    pos = text.find(MESSAGE_JOIN)
    while pos != -1 and len(out) < 8:
        # the run after first: one search settles most boundaries (no digits after them)
        after = _SHORT_RUN.search(text, pos + 1, pos + 61)
        before = list(_SHORT_RUN.finditer(text, max(0, pos - 60), pos)) if after else None
        if before and after:
            digits = re.sub(r"[^0-9]", "", before[-1].group() + after.group())
            if tckn_valid(digits):
                out.append(("tckn", before[-1].start(), after.end()))
        pos = text.find(MESSAGE_JOIN, pos + 1)
    return out
