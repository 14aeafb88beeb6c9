"""The flood scenario's verdict (`fairgate bench --scenario flood`, issue 36): how much a light
tenant notices a flooding one on each target.

The light tenant (tenant 0) arrives at the same Poisson rate in both phases, alone and beside the
flood (tenant 1); its TTFT percentiles under the flood over those alone are the ratios a tenant
feels (`light_p99_vs_alone`, `light_p50_vs_alone`: 1.0 is "does not notice"), and the flood's
output tokens/s says what the target kept serving meanwhile. Run it against a fair server and a
first-come-first-served one (or the same server with its fair queue off) in one bench run to
compare them.
"""

from __future__ import annotations

from typing import Any

from fairgate.gateway.loadgen.client import RequestResult
from fairgate.gateway.loadgen.stats import distribution, values

LIGHT, FLOOD = 0, 1


def flood_figures(results: list[RequestResult], alone: str, flood: str, flood_seconds: float) -> dict[str, Any]:
    """One target's figures: the light tenant's TTFT alone and under the flood, their ratios,
    the flood's output tokens/s and both tenants' errors."""
    light_alone = [r for r in results if r.level == alone and r.tenant == LIGHT]
    light_flood = [r for r in results if r.level == flood and r.tenant == LIGHT]
    flooder = [r for r in results if r.level == flood and r.tenant == FLOOD]
    a, f = distribution(values(light_alone, "ttft")), distribution(values(light_flood, "ttft"))
    return {
        "light_alone_ttft": a, "light_flood_ttft": f,
        "light_p50_vs_alone": _ratio(f["p50"], a["p50"]), "light_p99_vs_alone": _ratio(f["p99"], a["p99"]),
        "flood_output_throughput": sum(r.output_tokens for r in flooder if r.ok) / flood_seconds
        if flood_seconds > 0 else None,
        "light_errors": sum(not r.ok for r in light_alone + light_flood), "flood_errors": sum(not r.ok for r in flooder),
        "flood_sent": len(flooder),
    }


def _ratio(num: Any, den: Any) -> float | None:
    return round(num / den, 3) if num is not None and den else None


def print_flood(doc: dict[str, Any]) -> None:
    """The terminal lines: per target, the light tenant's TTFT alone / under the flood."""
    print(f"{'target':<24} {'light ttft50':>12} {'flood ttft50':>12} {'x':>6} {'light ttft99':>12} "
          f"{'flood ttft99':>12} {'x':>6} {'flood tok/s':>11}")
    for target, tf in doc["targets"].items():
        f = tf.get("flood")
        if not f:
            continue

        def ms(d: dict[str, Any], p: str) -> str:
            return "-" if d[p] is None else f"{d[p] * 1000:.1f}"

        def x(v: float | None) -> str:
            return "-" if v is None else f"{v:.2f}"

        tput = f["flood_output_throughput"]
        print(f"{target:<24} {ms(f['light_alone_ttft'], 'p50'):>12} {ms(f['light_flood_ttft'], 'p50'):>12} "
              f"{x(f['light_p50_vs_alone']):>6} {ms(f['light_alone_ttft'], 'p99'):>12} "
              f"{ms(f['light_flood_ttft'], 'p99'):>12} {x(f['light_p99_vs_alone']):>6} "
              f"{'-' if tput is None else f'{tput:.1f}':>11}")
