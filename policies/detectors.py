"""Every built-in detector, run in order over normalised text (see `sensitivity`).

Order matters only for overlaps: e-mails and IBAN-shaped strings are found first, and their
spans are not re-read as numbers.
"""

from __future__ import annotations

from policies.digit_chains import scan_numbers
from policies.emails import find_emails
from policies.iban import scan_foreign_ibans

DETECTOR_KINDS = ("tckn", "iban", "phone", "card", "email", "pattern", "keyword")
MAX_FINDINGS = 64  # one finding keeps a request local; more only cost time
Span = tuple[str, int, int]


def detect(text: str, depth: int = 0) -> list[Span]:
    """(kind, start, end) findings on normalised `text`. `depth` > 0: a decoded run, not
    decoded again."""
    out: list[Span] = [("email", s, e) for s, e in find_emails(text, MAX_FINDINGS)]
    blocked = [(s, e) for _, s, e in out]

    def foreign_iban(start: int, end: int, valid: bool) -> None:
        blocked.append((start, end))  # a bad IBAN's digits are not a card either
        if valid:
            out.append(("iban", start, end))

    scan_foreign_ibans(text, foreign_iban)
    blocked.sort()
    scan_numbers(text, blocked, lambda kind, s, e: out.append((kind, s, e)), MAX_FINDINGS)
    return out
