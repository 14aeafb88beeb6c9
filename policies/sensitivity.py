"""Personal-data (KVKK) detection: pure functions over prompt text, no I/O.

`classify(text, patterns=(), keywords=())` normalises the text (invisible characters dropped,
compatibility digits folded: `textnorm.normalize`), runs every detector of `detectors.detect`
(national IDs, IBANs, phones, cards, e-mails plain and obfuscated, tax numbers, passports,
plates, birth dates, names with addresses, KVKK special categories tied to a person, and the
same again inside base64 / hex / URL / HTML-entity runs and Turkish number words), then the
tenant's own patterns (RE2, linear time) and keywords. Each `Finding` names its kind and span
in the original text's offsets; findings never carry the matched text, so they are safe to audit.

Cost is linear in the text: regexes without nested repeats, bounded windows around anchors,
numpy for long digit runs, bounded decoding, and at most `MAX_FINDINGS` findings (one is
enough to keep a request local).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fairgate.policies.detection.detectors import DETECTOR_KINDS, MAX_FINDINGS, detect
from fairgate.policies.detection.institutional import drop_non_personal
from fairgate.policies.detection.tenant_patterns import tenant_findings, validate_tenant_patterns
from fairgate.policies.detection.textnorm import MESSAGE_JOIN, normalize
from fairgate.policies.detection_options import DEFAULT_OPTIONS, DetectionOptions

__all__ = ["DEFAULT_OPTIONS", "DETECTOR_KINDS", "Classification", "DetectionOptions", "Finding", "classify",
           "classify_parts", "validate_tenant_patterns"]


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


def classify(
    text: str, patterns: Iterable[str] = (), keywords: Iterable[str] = (),
    options: DetectionOptions = DEFAULT_OPTIONS,
) -> Classification:
    """Find personal data in `text`.

    `patterns` are tenant regular expressions (RE2 syntax, case-insensitive, matched on the
    normalised text, so `\\d` also matches other scripts' digits), `keywords` tenant words or
    phrases (case-insensitive, whole words). A tenant pattern RE2 cannot compile raises
    `re.error`: the caller must treat a failed classification as sensitive. `options`: the
    tenant's detection settings (names alone sensitive; companies' identifiers and institutions'
    contact points personal or not).
    Returns `Classification(sensitive, findings)` with findings sorted by start.
    """
    norm = normalize(text)
    found = drop_non_personal(norm.text, detect(norm.text), options)
    if not options.strict_names and all(kind == "person_name" for kind, _, _ in found):
        found = []  # a name alone is not enough for this tenant
    found += tenant_findings(norm.text, patterns, keywords)
    findings = sorted({Finding(kind, *norm.to_original(s, e)) for kind, s, e in found[: 4 * MAX_FINDINGS]},
                      key=lambda f: (f.start, f.end, f.kind))
    return Classification(bool(findings), tuple(findings))


def classify_parts(
    parts: Sequence[str], patterns: Iterable[str] = (), keywords: Iterable[str] = (),
    options: DetectionOptions = DEFAULT_OPTIONS,
) -> Classification:
    """Classify several texts (chat messages) as one, so a number, IBAN or address split across
    two messages is still found. Spans index the parts joined by one character (as " ".join)."""
    return classify(MESSAGE_JOIN.join(parts), patterns, keywords, options)
