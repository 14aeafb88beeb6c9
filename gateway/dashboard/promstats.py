"""Figures read from a Prometheus registry in the process: histogram percentiles, counter
sums and ratios grouped by one label. What the dashboard shows of this replica since it started.

Percentiles are estimated from the buckets the way PromQL's `histogram_quantile` does it:
linear inside the bucket the rank falls in, the top bucket's lower bound past the last finite one.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry


@dataclass(slots=True)
class Buckets:
    """One histogram aggregated over the labels not grouped by: upper bound -> cumulative count."""

    cumulative: dict[float, float] = field(default_factory=dict)
    total: float = 0.0
    sum: float = 0.0

    def quantile(self, q: float) -> float | None:
        if self.total <= 0:
            return None
        rank = q * self.total
        lower, below = 0.0, 0.0
        bounds = sorted(self.cumulative)
        for upper in bounds:
            count = self.cumulative[upper]
            if count >= rank:
                if math.isinf(upper):
                    return lower  # past the last finite bucket: its bound is all we know
                inside = count - below
                return lower + (upper - lower) * ((rank - below) / inside if inside else 1.0)
            lower, below = upper, count
        return lower


Where = dict[str, str] | None  # only samples with these label values (e.g. one tenant)


def _matches(labels: dict[str, str], where: Where) -> bool:
    return not where or all(labels.get(k) == v for k, v in where.items())


def samples(registry: CollectorRegistry, name: str, where: Where = None) -> list[tuple[dict[str, str], float]]:
    """(labels, value) of every sample called `name` (e.g. `fairgate_prompt_tokens_total`)."""
    out = []
    for family in registry.collect():
        for s in family.samples:
            if s.name == name and _matches(s.labels, where):
                out.append((dict(s.labels), float(s.value)))
    return out


def histograms(registry: CollectorRegistry, name: str, by: str, where: Where = None) -> dict[str, Buckets]:
    """The histogram `name` (without `_bucket`), summed per value of label `by`."""
    groups: dict[str, Buckets] = defaultdict(Buckets)
    for family in registry.collect():
        if family.name != name:
            continue
        for s in family.samples:
            if not _matches(s.labels, where):
                continue
            key = s.labels.get(by, "")
            if s.name == f"{name}_bucket":
                le = float(s.labels["le"])
                b = groups[key]
                b.cumulative[le] = b.cumulative.get(le, 0.0) + float(s.value)
            elif s.name == f"{name}_count":
                groups[key].total += float(s.value)
            elif s.name == f"{name}_sum":
                groups[key].sum += float(s.value)
    return dict(groups)


def sum_by(registry: CollectorRegistry, name: str, by: str, where: Where = None) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for labels, value in samples(registry, name, where):
        totals[labels.get(by, "")] += value
    return dict(totals)


def ratio_by(registry: CollectorRegistry, numerator: str, denominator: str, by: str,
             where: Where = None) -> dict[str, float]:
    """numerator / denominator per value of `by`, for groups whose denominator is not zero."""
    num, den = sum_by(registry, numerator, by, where), sum_by(registry, denominator, by, where)
    return {k: num.get(k, 0.0) / d for k, d in sorted(den.items()) if d > 0}


def total(registry: CollectorRegistry, name: str) -> float | None:
    found = samples(registry, name)
    return sum(v for _, v in found) if found else None
