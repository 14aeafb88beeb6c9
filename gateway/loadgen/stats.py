"""Every figure of a bench run, as plain JSON-ready dicts.

Per target: per load point (counts, throughput, goodput under the SLO, TTFT/ITL/E2E/TPOT
percentiles), and over the whole run by route (the backend that served), by prompt-length
bucket, by tenant and by workload mix, the error counts, the CDFs, and the cost when the server
reported one. Goodput (DistServe, Zhong et al. 2024) is the rate of requests that met every
latency objective given: TTFT ≤ --slo-ttft, TPOT (the request's mean inter-token gap) ≤
--slo-itl, E2E ≤ --slo-e2e.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fairgate.gateway.loadgen.client import RequestResult

PERCENTILES = (50, 95, 99)
METRICS = ("ttft", "itl", "e2e", "tpot")
BUCKET_EDGES = (64, 256, 1024, 4096, 16384)  # prompt tokens
CDF_POINTS = 200


@dataclass(slots=True, frozen=True)
class Slo:
    """Latency objectives in seconds (None: not judged)."""

    ttft: float | None = None
    itl: float | None = None
    e2e: float | None = None

    def met(self, r: RequestResult) -> bool:
        checks = ((self.ttft, r.ttft), (self.itl, r.tpot), (self.e2e, r.e2e))
        return r.ok and all(limit is None or (value is not None and value <= limit) for limit, value in checks)

    def as_dict(self) -> dict[str, float | None]:
        return {"ttft": self.ttft, "itl": self.itl, "e2e": self.e2e}


def values(results: Iterable[RequestResult], metric: str) -> list[float]:
    """The measured values of `metric` over the completed requests (ITL: every gap)."""
    out: list[float] = []
    for r in results:
        if not r.ok:
            continue
        if metric == "itl":
            out.extend(r.itl)
        elif (v := getattr(r, metric)) is not None:
            out.append(v)
    return out


def distribution(xs: list[float]) -> dict[str, float | int | None]:
    if not xs:
        return {"count": 0, "mean": None, "max": None, **{f"p{p}": None for p in PERCENTILES}}
    arr = np.asarray(xs, dtype=float)
    pct = np.percentile(arr, PERCENTILES)
    return {"count": len(xs), "mean": float(arr.mean()), "max": float(arr.max()),
            **{f"p{p}": float(v) for p, v in zip(PERCENTILES, pct, strict=True)}}


def cdf(xs: list[float], points: int = CDF_POINTS) -> list[list[float]]:
    """[[value, share of values ≤ it], ...], at most `points` of them, ending at 1.0."""
    if not xs:
        return []
    arr = np.sort(np.asarray(xs, dtype=float))
    idx = np.unique(np.linspace(0, len(arr) - 1, min(points, len(arr))).round().astype(int))
    return [[float(arr[i]), float((i + 1) / len(arr))] for i in idx]


def bucket_of(prompt_tokens: int | None) -> str:
    if prompt_tokens is None:
        return "unknown"
    lo = 0
    for edge in BUCKET_EDGES:
        if prompt_tokens < edge:
            return f"{lo}-{edge - 1}"
        lo = edge
    return f">={lo}"


def bucket_order(label: str) -> int:
    return -1 if label == "unknown" else int(label.lstrip(">=").split("-")[0])


def group(results: list[RequestResult]) -> dict[str, Any]:
    """Counts and latency distributions of a set of requests."""
    ok = [r for r in results if r.ok]
    return {"sent": len(results), "completed": len(ok), "errors": len(results) - len(ok),
            "prompt_tokens": sum(r.prompt_tokens or 0 for r in ok),
            "output_tokens": sum(r.output_tokens for r in ok),
            **{m: distribution(values(ok, m)) for m in METRICS}}


def group_by(results: list[RequestResult], key: Callable[[RequestResult], Any],
             order: Callable[[Any], Any] = str) -> dict[str, dict[str, Any]]:
    parts: dict[Any, list[RequestResult]] = {}
    for r in results:
        parts.setdefault(key(r), []).append(r)
    return {str(k): group(parts[k]) for k in sorted(parts, key=order)}


def level_figures(results: list[RequestResult], seconds: float, slo: Slo) -> dict[str, Any]:
    fig = group(results)
    good = sum(1 for r in results if slo.met(r))
    span = max(seconds, 1e-9)
    fig.update(seconds=seconds, request_throughput=fig["completed"] / span,
               output_throughput=fig["output_tokens"] / span,
               total_token_throughput=(fig["output_tokens"] + fig["prompt_tokens"]) / span,
               goodput=good / span, slo_met=good,
               slo_attainment=good / fig["completed"] if fig["completed"] else None)
    return fig


def cost_figures(results: list[RequestResult]) -> dict[str, Any] | None:
    """Cost per 1M tokens over the requests whose server reported a cost (None: none did)."""
    priced = [r for r in results if r.ok and r.cost is not None]
    if not priced:
        return None
    total = sum(r.cost or 0.0 for r in priced)
    out_tok = sum(r.output_tokens for r in priced)
    all_tok = out_tok + sum(r.prompt_tokens or 0 for r in priced)
    return {"requests": len(priced), "cost": total,
            "cost_per_million_output_tokens": total / out_tok * 1e6 if out_tok else None,
            "cost_per_million_tokens": total / all_tok * 1e6 if all_tok else None}


def error_messages(results: list[RequestResult], limit: int = 5) -> list[dict[str, Any]]:
    """The first `limit` distinct errors (kind, code, message) in the order they first came, with
    how often each came: what a failing run prints, so it says why and not only how often."""
    seen: dict[tuple[str, str, str], int] = {}
    for r in sorted((r for r in results if r.error), key=lambda r: r.start):
        key = (r.error or "", r.error_code, r.error_detail)
        seen[key] = seen.get(key, 0) + 1
    return [{"error": e, "code": c, "message": m, "count": n} for (e, c, m), n in list(seen.items())[:limit]]


def target_figures(results: list[RequestResult], levels: list[str], seconds: dict[str, float],
                   slo: Slo) -> dict[str, Any]:
    """All figures of one target; `seconds` maps a level label to its wall time under load."""
    by_level = {lv: level_figures([r for r in results if r.level == lv], seconds.get(lv, 0.0), slo)
                for lv in levels}
    ok = [r for r in results if r.ok]
    return {
        "overall": group(results),
        "levels": by_level,
        "by_route": group_by(results, lambda r: r.route or "unknown"),
        "by_prompt_bucket": group_by(results, lambda r: bucket_of(r.prompt_tokens), bucket_order),
        "by_tenant": group_by(results, lambda r: r.tenant, int),
        "by_workload": group_by(results, lambda r: r.workload),
        "errors": dict(Counter(r.error for r in results if r.error)),
        "error_examples": {r.error: r.error_detail for r in reversed(results) if r.error},
        "error_messages": error_messages(results),
        "cdf": {m: cdf(values(ok, m)) for m in ("ttft", "itl", "e2e")},
        "level_cdf": {m: {lv: cdf(values([r for r in ok if r.level == lv], m)) for lv in levels}
                      for m in ("ttft", "itl", "e2e")},
        "cost": cost_figures(results),
    }
