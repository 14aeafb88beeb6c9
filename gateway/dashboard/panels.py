"""The dashboard's panels: each a title, plots (inline SVG) and a small table, built from the
database figures (`data`) and this replica's Prometheus registry (`promstats`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from fairgate.gateway.dashboard import promstats
from fairgate.gateway.dashboard.data import QuotaUse, Usage
from fairgate.gateway.dashboard.svg import Series, bar_chart, line_chart

if TYPE_CHECKING:
    from fairgate.backends.base import Backend

QUANTILES = (0.5, 0.95, 0.99)


@dataclass(slots=True)
class Panel:
    id: str  # the element id, e.g. "usage"
    title: str
    plots: list[str] = field(default_factory=list)  # SVG markup, escaped already
    columns: list[str] = field(default_factory=list)
    rows: list[list[Any]] = field(default_factory=list)
    note: str = ""
    links: list[tuple[str, str]] = field(default_factory=list)  # (text, href), e.g. each tenant's page


def _name(names: Mapping[str, str], tenant_id: str) -> str:
    return names.get(tenant_id, tenant_id)


def _filled(u: Usage, column: str) -> dict[str, list[tuple[str, float]]]:
    """tenant id -> (bucket, value) for every bucket of the window, 0 where it had no requests."""
    values: dict[str, dict[str, float]] = {}
    for r in u.rows:
        if column in r:
            values.setdefault(r["tenant_id"], {})[str(r["group"])] = float(r[column])
    labels = u.buckets or sorted({b for v in values.values() for b in v})
    return {t: [(b, v.get(b, 0.0)) for b in labels] for t, v in values.items()}


def usage_panel(u: Usage, names: Mapping[str, str]) -> Panel:
    p = Panel("usage", f"Usage and cost per tenant, by {u.group_by}")
    p.plots.append(line_chart("Tokens per tenant", [Series(_name(names, t), pts)
                                                    for t, pts in _filled(u, "total_tokens").items()], " tokens"))
    if u.has_cost:
        p.plots.append(line_chart("Cost per tenant", [Series(_name(names, t), pts)
                                                      for t, pts in _filled(u, "cost").items()]))
    p.columns = ["tenant", "requests", "prompt tokens", "completion tokens", "total tokens"]
    if u.has_cost:
        p.columns += ["cost", "cost / 1M tokens"]
    for t, tot in sorted(u.totals.items(), key=lambda kv: -kv[1].get("total_tokens", 0)):
        row: list[Any] = [_name(names, t), *(int(tot.get(k, 0)) for k in
                                              ("requests", "prompt_tokens", "completion_tokens", "total_tokens"))]
        if u.has_cost:
            row += [f"{tot.get('cost', 0.0):.6g}", f"{tot.get('cost_per_million_tokens', 0.0):.6g}"]
        p.rows.append(row)
    return p


def latency_panel(reg: CollectorRegistry, where: promstats.Where = None) -> Panel:
    p = Panel("latency", "Latency percentiles (this replica, since start)")
    p.columns = ["metric", "route", "requests", *(f"p{int(q * 100)} ms" for q in QUANTILES)]
    for metric, title in (("fairgate_time_to_first_token_seconds", "TTFT"),
                          ("fairgate_inter_token_latency_seconds", "ITL"),
                          ("fairgate_e2e_request_latency_seconds", "end-to-end")):
        groups = promstats.histograms(reg, metric, "route", where)
        bars = []
        for route, b in sorted(groups.items()):
            if b.total <= 0:
                continue
            qs = [b.quantile(q) for q in QUANTILES]
            p.rows.append([title, route or "-", int(b.total), *(f"{q * 1000:.1f}" if q is not None else "-" for q in qs)])
            bars += [(f"{route} p50", (qs[0] or 0) * 1000), (f"{route} p95", (qs[1] or 0) * 1000)]
        if metric != "fairgate_e2e_request_latency_seconds":
            p.plots.append(bar_chart(f"{title} by route", bars, " ms"))
    return p


def cache_panel(reg: CollectorRegistry, where: promstats.Where = None, names: Mapping[str, str] | None = None
                ) -> Panel:
    p = Panel("cache", "Prefix-cache hit rate (share of prompt tokens found cached)")
    hits, queries = "fairgate_prefix_cache_hits_tokens_total", "fairgate_prefix_cache_queries_tokens_total"
    for label, title in (("route", "by route"), ("tenant", "by tenant"), ("prompt_version", "by prompt version")):
        if label == "tenant" and where and "tenant" in where:
            continue  # a tenant's own page: one tenant
        rates = promstats.ratio_by(reg, hits, queries, label, where)
        shown = {(_name(names or {}, k) if label == "tenant" else k): v * 100 for k, v in rates.items()}
        p.plots.append(bar_chart(f"Hit rate {title}", sorted(shown.items()), "%", maximum=100.0))
    return p


def quota_panel(uses: list[QuotaUse], names: Mapping[str, str]) -> Panel:
    p = Panel("quota", "Quota consumption (today / this month, UTC)")
    p.plots.append(bar_chart("Share of each limit used",
                             [(f"{_name(names, u.tenant_id)} {u.limit_name}", u.share * 100) for u in uses],
                             "%", maximum=100.0))
    p.columns = ["tenant", "limit", "used", "limit value", "used %"]
    p.rows = [[_name(names, u.tenant_id), u.limit_name, f"{u.used:.6g}", f"{u.limit:.6g}", f"{u.share * 100:.1f}"]
              for u in uses]
    if not uses:
        p.note = "No tenant has a daily or monthly limit."
    return p


def routing_panel(by_backend: dict[str, tuple[int, int]], backends: Mapping[str, Backend],
                  decisions: dict[str, int]) -> Panel:
    """Requests by where they ran: a local backend (company hardware), an external API, or none."""
    where: dict[str, int] = {"local": 0, "external": 0, "refused / no backend": 0, "unregistered": 0}
    p = Panel("routing", "Routing: local vs external")
    p.columns = ["backend", "where", "requests", "tokens"]
    for name, (n, tokens) in sorted(by_backend.items()):
        b = backends.get(name)
        kind = "refused / no backend" if not name else ("unregistered" if b is None else
                                                       ("local" if b.is_local else "external"))
        where[kind] += n
        p.rows.append([name or "-", kind, n, tokens])
    p.plots.append(bar_chart("Requests by where they ran", [(k, v) for k, v in where.items() if v]))
    p.plots.append(bar_chart("Audited routing decisions", sorted(decisions.items())))
    return p


def engine_panel(reg: CollectorRegistry) -> Panel:
    """KV usage, queue, preemptions and speculative acceptance of the engines this replica runs."""
    p = Panel("engine", "Engine: KV cache, preemptions, speculative decoding")
    used = promstats.sum_by(reg, "fairgate_kv_blocks_used", "model")
    total = promstats.sum_by(reg, "fairgate_kv_blocks_total", "model")
    cached = promstats.sum_by(reg, "fairgate_kv_blocks_cached", "model")
    replicas = [(f"{labels.get('pool', '')}/{labels.get('replica', '')}", v * 100)
                for labels, v in promstats.samples(reg, "fairgate_pool_replica_kv_usage")]
    if replicas:
        p.plots.append(bar_chart("KV use of pool replicas (last probe)", sorted(replicas), "%", maximum=100.0))
    if not total:
        if not replicas:
            p.note = "No engine runs in this gateway process (engine servers show theirs at their /metrics)."
        return p
    p.plots.append(bar_chart("KV blocks in use", [(m, used.get(m, 0) / t * 100) for m, t in total.items() if t],
                             "%", maximum=100.0))
    stat = {name: promstats.sum_by(reg, name, "model") for name in (
        "fairgate_requests_running", "fairgate_requests_waiting", "fairgate_preemptions_total",
        "fairgate_spec_draft_tokens_total", "fairgate_spec_accepted_tokens_total")}
    p.columns = ["model", "KV used / total", "cached blocks", "running", "waiting", "preemptions",
                 "spec acceptance"]
    for m, t in sorted(total.items()):
        drafts = stat["fairgate_spec_draft_tokens_total"].get(m, 0.0)
        accepted = stat["fairgate_spec_accepted_tokens_total"].get(m, 0.0)
        p.rows.append([m, f"{int(used.get(m, 0))} / {int(t)}", int(cached.get(m, 0)),
                       int(stat["fairgate_requests_running"].get(m, 0)), int(stat["fairgate_requests_waiting"].get(m, 0)),
                       int(stat["fairgate_preemptions_total"].get(m, 0)),
                       f"{accepted / drafts * 100:.1f}%" if drafts else "off"])
    by_pos = promstats.sum_by(reg, "fairgate_spec_accepted_by_position_total", "position")
    if by_pos:
        verifies = promstats.total(reg, "fairgate_spec_drafts_total") or 0.0
        p.plots.append(bar_chart("Speculative acceptance by draft position",
                                 [(f"position {k}", v / verifies * 100 if verifies else 0.0)
                                  for k, v in sorted(by_pos.items(), key=lambda kv: int(kv[0]))], "%", maximum=100.0))
    return p


def advice_items(items: list[Any]) -> list[dict[str, str]]:
    """Advice items as title/detail pairs: strings, mappings or dataclasses (fields shown as text)."""
    out = []
    for item in items:
        if dataclasses.is_dataclass(item) and not isinstance(item, type):
            item = dataclasses.asdict(item)
        if isinstance(item, Mapping):
            title = str(item.get("title") or item.get("lever") or item.get("summary") or "")
            rest = {k: v for k, v in item.items() if k not in ("title", "lever", "summary") and v not in (None, "")}
            out.append({"title": title, "detail": "; ".join(f"{k}: {v}" for k, v in rest.items())})
        else:
            out.append({"title": str(item), "detail": ""})
    return out
