"""Recall and precision of `policies.sensitivity` on the labelled corpus, per kind and overall.

A labelled item counts as found when a finding of the same kind overlaps its span; a finding
counts as correct when it overlaps a labelled item of the same kind.
"""

from __future__ import annotations

from dataclasses import dataclass

from fairgate.policies.sensitivity import classify_parts
from tests.helpers.pii_corpus import Sample

KINDS = ("tckn", "iban", "phone", "card", "email")


@dataclass(slots=True)
class KindScore:
    labelled: int = 0
    found: int = 0
    findings: int = 0
    correct: int = 0

    @property
    def recall(self) -> float:
        return self.found / self.labelled if self.labelled else 1.0

    @property
    def precision(self) -> float:
        return self.correct / self.findings if self.findings else 1.0

    def as_dict(self) -> dict[str, float | int]:
        return {"labelled": self.labelled, "recall": round(self.recall, 4), "findings": self.findings,
                "precision": round(self.precision, 4)}


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def score(samples: list[Sample], ignore: tuple[str, ...] = ("person_name",)) -> dict[str, KindScore]:
    """Per-kind scores; findings of the `ignore` kinds are left out: the generated sets do not
    label person names (the realistic set, `bench/kvkk_real.py`, does)."""
    scores = {k: KindScore() for k in (*KINDS, "all")}
    for s in samples:
        found = [f for f in classify_parts(s.parts).findings if f.kind not in ignore]
        for kind, start, end in s.labels:
            hit = any(f.kind == kind and _overlap((f.start, f.end), (start, end)) for f in found)
            for k in (kind, "all"):
                scores.setdefault(k, KindScore())
                scores[k].labelled += 1
                scores[k].found += hit
        for f in found:
            ok = any(f.kind == k and _overlap((f.start, f.end), (s0, e0)) for k, s0, e0 in s.labels)
            for k in (f.kind, "all"):
                scores.setdefault(k, KindScore())
                scores[k].findings += 1
                scores[k].correct += ok
    return scores
