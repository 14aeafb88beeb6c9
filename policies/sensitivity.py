"""Personal-data (KVKK) detection: pure functions over prompt text, no I/O.

`classify(text, patterns=(), keywords=())` finds Turkish national IDs (TCKN, both check
digits), IBANs (Turkish and other countries', mod-97), phone numbers (Turkish +90 / 0090 / 0
prefixes, bare 5xx mobiles in their usual shapes, any "+<country>" number), e-mail addresses,
payment cards (13-19 digits, Luhn) and tenant-defined regular expressions and keywords. Each
`Finding` names its kind and span; spans index the text as given (detectors match raw text and
fold only matched pieces). Findings never carry the matched text, so they are safe to audit.

Speed: ordinary prose costs a few C-speed regex scans; Python code runs only on digit runs of
11+ characters (see `digit_chains`), around each '@' and on IBAN-shaped strings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from policies.digit_chains import scan_numbers
from policies.iban import scan_foreign_ibans
from policies.textnorm import MESSAGE_JOIN

DETECTOR_KINDS = ("tckn", "iban", "phone", "card", "email", "pattern", "keyword")


@dataclass(slots=True, frozen=True)
class Finding:
    kind: str
    start: int
    end: int


@dataclass(slots=True, frozen=True)
class Classification:
    sensitive: bool
    findings: tuple[Finding, ...]

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(sorted({f.kind for f in self.findings}))


# E-mail, matched outward from each '@'. U+E000 (a message boundary) may sit anywhere inside an
# address that a client split across two messages.
_EMAIL_LOCAL = re.compile(r"[\w.+%\-\ue000]{1,64}\Z")
_EMAIL_DOMAIN = re.compile(
    r"[\w\-\ue000]+(?:\.[\w\-\ue000]+)*\.(?:[^\W\d_]|\ue000)*[^\W\d_](?:[^\W\d_]|\ue000)*[^\W\d_]"
)


def classify(
    text: str, patterns: Iterable[str] = (), keywords: Iterable[str] = ()
) -> Classification:
    """Find personal data in `text`.

    `patterns` are tenant regular expressions (matched case-insensitively on the raw text;
    `\\d` there matches any script's digits),
    `keywords` tenant words or phrases (case-insensitive, whole words). An invalid tenant pattern
    raises `re.error`: the caller must treat a failed classification as sensitive.
    Returns `Classification(sensitive, findings)` with findings sorted by start.
    """
    return _classify(text, patterns, keywords)


def classify_parts(
    parts: Sequence[str], patterns: Iterable[str] = (), keywords: Iterable[str] = ()
) -> Classification:
    """Classify several texts (chat messages) as one, so a number, IBAN or address split across
    two messages is still found. Spans index the parts joined by one character (as " ".join)."""
    return _classify(MESSAGE_JOIN.join(parts), patterns, keywords)


def _classify(text: str, patterns: Iterable[str], keywords: Iterable[str]) -> Classification:
    findings: list[Finding] = []
    emails: list[tuple[int, int]] = []
    for at_sign in ("@", "\uff20"):  # ASCII and full-width
        at = text.find(at_sign)
        while at != -1:
            at = _scan_email(text, at, at_sign, emails)
    blocked = list(emails)
    findings.extend(Finding("email", s, e) for s, e in emails)

    def foreign_iban(start: int, end: int, valid: bool) -> None:
        blocked.append((start, end))  # a bad IBAN's digits are not a card either
        if valid:
            findings.append(Finding("iban", start, end))

    scan_foreign_ibans(text, foreign_iban)
    blocked.sort()
    scan_numbers(text, blocked, lambda kind, s, e: findings.append(Finding(kind, s, e)))
    for kind, rx in _compile_tenant(tuple(patterns), tuple(keywords)):
        for m in rx.finditer(text):
            if m.end() > m.start():
                findings.append(Finding(kind, m.start(), m.end()))
    findings.sort(key=lambda f: (f.start, f.end))
    return Classification(bool(findings), tuple(findings))


def _scan_email(text: str, at: int, at_sign: str, out: list[tuple[int, int]]) -> int:
    """Match an address around the '@' at `at`; return the next '@' to look at (or -1)."""
    # Leftmost run of local-part characters that ends exactly at this '@' (at most 64 back).
    local = _EMAIL_LOCAL.search(text, max(0, at - 64), at)
    domain = _EMAIL_DOMAIN.match(text, at + 1)
    if local is None or domain is None:
        return text.find(at_sign, at + 1)
    start = local.start()
    while start < at and text[start] in "." + MESSAGE_JOIN:  # not a leading dot or boundary
        start += 1
    if start == at:
        return text.find(at_sign, at + 1)
    out.append((start, domain.end()))
    return text.find(at_sign, domain.end())


@lru_cache(maxsize=256)
def _compile_tenant(
    patterns: tuple[str, ...], keywords: tuple[str, ...]
) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """Tenant regexes compiled one by one (their own groups and flags stay valid), plus one
    alternation of all keywords as whole words. Cached: a tenant reuses the same tuples."""
    compiled = [("pattern", re.compile(p, re.IGNORECASE)) for p in patterns]
    words = sorted({k.strip() for k in keywords if k.strip()}, key=len, reverse=True)
    if words:
        alt = "|".join(re.escape(w) for w in words)
        compiled.append(("keyword", re.compile(rf"(?<!\w)(?:{alt})(?!\w)", re.IGNORECASE)))
    return tuple(compiled)


def validate_tenant_patterns(patterns: Iterable[str]) -> list[str]:
    """One error message per tenant pattern that does not compile or matches the empty string."""
    errors: list[str] = []
    for i, p in enumerate(patterns):
        try:
            rx = re.compile(p, re.IGNORECASE)
        except re.error as exc:
            errors.append(f"pattern {i}: invalid regular expression: {exc}")
            continue
        if rx.fullmatch("") is not None:
            errors.append(f"pattern {i}: matches the empty string")
    return errors
