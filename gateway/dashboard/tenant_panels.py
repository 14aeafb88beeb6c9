"""A tenant's own latency and prefix-cache figures, from its usage rows (data.TenantRequests).

Usage rows are written by every replica and carry TTFT, latency and cached tokens per request,
so a tenant's page is whole on any replica and needs no tenant labels on the metrics (those
are off by default: per-tenant series cost Prometheus memory). Refused requests are left out of
every latency figure and shown as a count by reason instead. Plots say "no data yet" only when
the tenant has no request in the window; otherwise they say why there is nothing to draw.
"""

from __future__ import annotations

from fairgate.gateway.dashboard.data import TENANT_ROWS, TenantRequests
from fairgate.gateway.dashboard.panels import HIT_RATE, LATENCY, QUANTILES, Panel
from fairgate.gateway.dashboard.svg import Axis, Bar, bar_chart


def percentile(values: list[float], q: float) -> float:
    """The q-quantile of `values`, linear between the closest ranks (numpy's default)."""
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def refusal_label(status: int, reason: str) -> str:
    """A refused row's reason (`refusals.refusal_reason` of its error code; a 400 from before
    usage rows kept error codes is a bad request or a prompt over the context)."""
    reason = reason or "validation or context length"
    return f"{reason.replace('_', ' ')} (HTTP {status})"


def _nothing(req: TenantRequests, figure: str) -> str:
    """What an empty plot says: "no data yet" only when there was no request at all."""
    if req.total == 0:
        return "no data yet"
    if req.served == 0:
        return f"all {req.total} requests in this window were refused: no {figure} to show"
    return f"no {figure} recorded for the {req.served} answered requests"


def latency_panel(req: TenantRequests, whose: str) -> Panel:
    """TTFT and end-to-end percentiles per route of the answered requests; refusals counted apart."""
    p = Panel("latency", f"{whose} latency (answered requests, every replica)")
    p.columns = ["metric", "route", "requests", *(f"p{int(q * 100)} ms" for q in QUANTILES)]
    for title, by_route in (("TTFT", req.ttft_ms), ("end-to-end", req.latency_ms)):
        bars = []
        for route, values in sorted(by_route.items()):
            qs = [percentile(values, q) for q in QUANTILES]
            p.rows.append([title, route, len(values), *(f"{v:.1f}" for v in qs)])
            bars += [Bar(f"{route} p50", qs[0]), Bar(f"{route} p95", qs[1])]
        figure = "time to first token" if title == "TTFT" else "end-to-end latency"
        p.plots.append(bar_chart(f"{whose} {figure} by route", bars, category="route and percentile",
                                 value=LATENCY, empty=_nothing(req, figure)))
    if req.refused:
        refused = sorted(req.refused.items())
        p.plots.append(bar_chart(f"{whose} refused requests by reason", [Bar(refusal_label(*k), n) for k, n in refused],
                                 category="reason", value=Axis("requests", "count")))
        n = sum(req.refused.values())
        p.note = (f"{n} refused request{' is' if n == 1 else 's are'} left out of the latency figures: "
                  + ", ".join(f"{n} {refusal_label(*k)}" for k, n in refused) + ".")
    if req.truncated:
        p.note += f" Figures from the newest {TENANT_ROWS} requests of the window."
    return p


def cache_panel(req: TenantRequests, whose: str) -> Panel:
    """The share of the answered requests' prompt tokens found in a prefix cache, per route."""
    p = Panel("cache", f"{whose} prefix-cache hit rate (share of prompt tokens found cached)")
    p.columns = ["route", "prompt tokens", "cached tokens", "hit rate"]
    bars = []
    for route, prompt in sorted(req.prompt_tokens.items()):
        cached = req.cached_tokens.get(route, 0)
        if prompt > 0:
            bars.append(Bar(route, cached / prompt * 100))
        p.rows.append([route, prompt, cached, f"{cached / prompt * 100:.1f}%" if prompt else "-"])
    prompt_total, cached_total = sum(req.prompt_tokens.values()), sum(req.cached_tokens.values())
    if len(bars) > 1:
        p.rows.append(["all routes", prompt_total, cached_total, f"{cached_total / prompt_total * 100:.1f}%"])
    p.plots.append(bar_chart(f"{whose} hit rate by route", bars, category="route", value=HIT_RATE, maximum=100.0,
                             empty=_nothing(req, "prompt tokens")))
    return p
