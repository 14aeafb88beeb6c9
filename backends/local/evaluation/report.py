"""Compare two sides' results, gate on thresholds, and print the table and the JSON line."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class SideResult:
    """What one engine configuration scored."""

    name: str
    perplexity: float | None = None
    heldout_tokens: int = 0
    passed: list[bool] = field(default_factory=list)  # per golden item
    outputs: list[list[int]] = field(default_factory=list)  # greedy token ids per prompt
    texts: list[str] = field(default_factory=list)  # greedy completions, cut at stops
    turkish: list[bool] = field(default_factory=list)  # per golden item: a Turkish item (id "tr-...")

    @property
    def pass_rate(self) -> float | None:
        return sum(self.passed) / len(self.passed) if self.passed else None


@dataclass(slots=True)
class Thresholds:
    max_ppl_delta_pct: float | None = 2.0
    max_pass_rate_drop: float | None = 1.0  # percentage points
    min_greedy_agreement: float | None = None  # fraction of identical outputs


def first_divergence(a: list[int], b: list[int]) -> int | None:
    """Index of the first differing token, or None when the sequences are identical."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def compare(cur: SideResult, base: SideResult, th: Thresholds) -> dict[str, Any]:
    """The metrics of the last-line JSON, with `violations` (empty = pass)."""
    m: dict[str, Any] = {
        "config": cur.name, "baseline": base.name,
        "perplexity": cur.perplexity, "baseline_perplexity": base.perplexity,
        "perplexity_delta_pct": None, "heldout_tokens": cur.heldout_tokens,
        "pass_rate": cur.pass_rate, "baseline_pass_rate": base.pass_rate,
        "pass_rate_delta_points": None, "golden_items": len(cur.passed),
        "greedy_agreement": None, "first_divergence_mean": None, "first_divergence_min": None,
        "greedy_prompts": len(cur.outputs),
    }
    if cur.perplexity is not None and base.perplexity is not None:
        m["perplexity_delta_pct"] = (cur.perplexity / base.perplexity - 1.0) * 100.0
    if cur.pass_rate is not None and base.pass_rate is not None:
        m["pass_rate_delta_points"] = (cur.pass_rate - base.pass_rate) * 100.0
    if cur.outputs:
        divs = [first_divergence(a, b) for a, b in zip(cur.outputs, base.outputs, strict=True)]
        diverged = [d for d in divs if d is not None]
        m["greedy_agreement"] = 1.0 - len(diverged) / len(divs)
        if diverged:
            m["first_divergence_mean"] = sum(diverged) / len(diverged)
            m["first_divergence_min"] = min(diverged)
    m.update(turkish_metrics(cur, base))
    m["violations"] = violations(m, th)
    m["passed"] = not m["violations"]
    return m


def turkish_metrics(cur: SideResult, base: SideResult) -> dict[str, Any]:
    """Pass rates and greedy agreement over the Turkish golden items alone (None without any):
    a quantization can hurt one language's rarer tokens while the overall numbers hold."""
    idx = [i for i, tr in enumerate(cur.turkish) if tr]
    out: dict[str, Any] = {"turkish_items": len(idx), "turkish_pass_rate": None,
                           "baseline_turkish_pass_rate": None, "turkish_greedy_agreement": None}
    if not idx:
        return out
    out["turkish_pass_rate"] = sum(cur.passed[i] for i in idx) / len(idx)
    out["baseline_turkish_pass_rate"] = sum(base.passed[i] for i in idx) / len(idx)
    if cur.outputs and base.outputs:
        same = sum(cur.outputs[i] == base.outputs[i] for i in idx)
        out["turkish_greedy_agreement"] = same / len(idx)
    return out


def violations(m: dict[str, Any], th: Thresholds) -> list[str]:
    out = []
    delta = m["perplexity_delta_pct"]
    if th.max_ppl_delta_pct is not None and delta is not None and (
            delta > th.max_ppl_delta_pct or math.isnan(delta)):
        out.append(f"perplexity +{delta:.3f}% > +{th.max_ppl_delta_pct}%")
    drop = m["pass_rate_delta_points"]
    if th.max_pass_rate_drop is not None and drop is not None and -drop > th.max_pass_rate_drop:
        out.append(f"pass rate {drop:+.1f} points < -{th.max_pass_rate_drop} points")
    agree = m["greedy_agreement"]
    if th.min_greedy_agreement is not None and agree is not None and agree < th.min_greedy_agreement:
        out.append(f"greedy agreement {agree:.3f} < {th.min_greedy_agreement}")
    return out


def _fmt(v: Any, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def format_table(m: dict[str, Any]) -> str:
    rows = [
        ("metric", "config", "baseline", "delta"),
        ("perplexity", _fmt(m["perplexity"], ".4f"), _fmt(m["baseline_perplexity"], ".4f"),
         _fmt(m["perplexity_delta_pct"], "+.3f") + ("%" if m["perplexity_delta_pct"] is not None else "")),
        ("pass rate", _fmt(m["pass_rate"], ".3f"), _fmt(m["baseline_pass_rate"], ".3f"),
         _fmt(m["pass_rate_delta_points"], "+.1f") + (" pt" if m["pass_rate_delta_points"] is not None else "")),
        ("greedy agreement", _fmt(m["greedy_agreement"], ".3f"), "1.000", ""),
        ("Turkish pass rate", _fmt(m.get("turkish_pass_rate"), ".3f"),
         _fmt(m.get("baseline_turkish_pass_rate"), ".3f"), ""),
        ("Turkish greedy agreement", _fmt(m.get("turkish_greedy_agreement"), ".3f"), "1.000", ""),
        ("first divergence (mean)", _fmt(m["first_divergence_mean"], ".1f"), "-", ""),
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [f"config:   {m['config']}", f"baseline: {m['baseline']}"]
    for j, r in enumerate(rows):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))))
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    verdict = "PASS" if m["passed"] else "FAIL: " + "; ".join(m["violations"])
    lines.append(verdict)
    return "\n".join(lines)


def json_line(m: dict[str, Any]) -> str:
    """One line of strict JSON; a non-finite number (a broken config's perplexity) becomes null."""
    clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in m.items()}
    return json.dumps(clean, allow_nan=False)
