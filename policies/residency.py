"""Whether a request's data must stay on local hardware: tenant setting, header, detectors.

The three sources only ever add strictness: a tenant's `local_only` or an
`X-Data-Classification: sensitive` header makes a request sensitive whatever the text says;
`public` is accepted but loosens nothing (the detectors still run). If the detectors raise —
a tenant's bad pattern, a bug — the request is sensitive: classification fails closed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fairgate.policies.detection_options import DEFAULT_OPTIONS, DetectionOptions
from fairgate.policies.sensitivity import classify_parts

HEADER_VALUES = ("sensitive", "public")
RESIDENCY_VALUES = ("any", "local_only")


@dataclass(slots=True, frozen=True)
class SensitivityVerdict:
    sensitive: bool
    kinds: tuple[str, ...]  # detector kinds found (never the matched text)
    reasons: tuple[str, ...]  # e.g. "tenant:local_only", "header:sensitive", "detector", "classification_failed", "uninspectable_content"
    spans: tuple[tuple[str, int, int], ...] = ()  # (kind, start, end) in the joined texts, never text


def parse_classification_header(value: str | None) -> str | None:
    """Normalise `X-Data-Classification`; None when absent. Raises ValueError on other values."""
    if value is None:
        return None
    v = value.strip().lower()
    if v == "":
        return None
    if v not in HEADER_VALUES:
        raise ValueError(
            f"X-Data-Classification must be one of {', '.join(HEADER_VALUES)}, got {value[:40]!r}"
        )
    return v


def assess(
    texts: Sequence[str],
    *,
    data_residency: str = "any",
    header: str | None = None,
    patterns: Iterable[str] = (),
    keywords: Iterable[str] = (),
    opaque: bool = False,
    options: DetectionOptions = DEFAULT_OPTIONS,
) -> SensitivityVerdict:
    """Decide sensitivity for one request. `header` must already be parsed (see above).

    An unknown `data_residency` counts as local_only: a typo in a tenant row must not open the
    door to external APIs. `opaque`: the request carries parts no text detector can read
    (images, audio, token ids); it counts as sensitive. `options`: the tenant's detection
    settings (`DetectionOptions`).
    """
    reasons: list[str] = []
    if data_residency != "any":
        reasons.append("tenant:local_only")
    if header == "sensitive":
        reasons.append("header:sensitive")
    if opaque:
        reasons.append("uninspectable_content")
    if reasons:
        # Already confined to local backends; detection would change nothing but cost time.
        return SensitivityVerdict(True, (), tuple(reasons))
    try:
        result = classify_parts(list(texts), patterns, keywords, options)
    except Exception:  # noqa: BLE001 - any detector failure must fail closed
        return SensitivityVerdict(True, (), ("classification_failed",))
    if result.sensitive:
        spans = tuple((f.kind, f.start, f.end) for f in result.findings)
        return SensitivityVerdict(True, result.kinds, ("detector",), spans)
    return SensitivityVerdict(False, (), ())
