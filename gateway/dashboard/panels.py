"""The dashboard's panels: each a title, plots (inline SVG) and a small table, built from the
database figures (`data`) and this replica's Prometheus registry (`promstats`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from fairgate.gateway.dashboard import promstats
from fairgate.gateway.dashboard.data import QuotaUse, Usage
from fairgate.gateway.dashboard.svg import Axis, Bar, Series, bar_chart, line_chart

if TYPE_CHECKING:
    from fairgate.backends.base import Backend

QUANTILES = (0.5, 0.95, 0.99)
LATENCY = Axis("latency", "ms")
HIT_RATE = Axis("share of prompt tokens cached", "%")


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


def label(key: str, blank: str) -> str:
    """A metric's label value as a bar's label: `blank` (e.g. "(no route)") where it is empty,
    so no bar goes unlabelled."""
    return key if key.strip() else blank


def _filled(u: Usage, column: str) -> dict[str, list[tuple[str, float]]]:
    """tenant id -> (bucket, value) for every bucket of the window, 0 where it had no requests."""
    values: dict[str, dict[str, float]] = {}
    for r in u.rows:
        if column in r:
            values.setdefault(r["tenant_id"], {})[str(r["group"])] = float(r[column])
    labels = u.buckets or sorted({b for v in values.values() for b in v})
    return {t: [(b, v.get(b, 0.0)) for b in labels] for t, v in values.items()}


def usage_panel(u: Usage, names: Mapping[str, str], one_tenant: bool = False) -> Panel:
    """Tokens (and cost) over the window per tenant; `one_tenant`: a tenant's own page."""
    p = Panel("usage", f"Usage and cost per tenant, by {u.group_by}")
    x, per = Axis(u.group_by, "UTC"), "" if one_tenant else " per tenant"
    for column, name, y in (("total_tokens", "Tokens", Axis("tokens", f"per {u.group_by}")),
                            ("cost", "Cost", Axis("cost", f"USD per {u.group_by}"))):
        if column == "cost" and not u.has_cost:
            continue
        series = [Series(label(_name(names, t), "(unnamed)"), pts) for t, pts in _filled(u, column).items()]
        p.plots.append(line_chart(name + per, series, x=x, y=y))
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
            name = label(route, "(no route)")
            bars += [Bar(f"{name} p50", (qs[0] or 0) * 1000), Bar(f"{name} p95", (qs[1] or 0) * 1000)]
        if metric != "fairgate_e2e_request_latency_seconds":
            p.plots.append(bar_chart(f"{title} by route", bars, category="route and percentile", value=LATENCY))
    return p


def cache_panel(reg: CollectorRegistry, where: promstats.Where = None, names: Mapping[str, str] | None = None
                ) -> Panel:
    p = Panel("cache", "Prefix-cache hit rate (share of prompt tokens found cached)")
    hits, queries = "fairgate_prefix_cache_hits_tokens_total", "fairgate_prefix_cache_queries_tokens_total"
    for by, title in (("route", "by route"), ("tenant", "by tenant"), ("prompt_version", "by prompt version")):
        if by == "tenant" and where and "tenant" in where:
            continue  # a tenant's own page: one tenant
        rates = promstats.ratio_by(reg, hits, queries, by, where)
        blank = "(tenant labels off)" if by == "tenant" else f"(no {by.replace('_', ' ')})"
        shown = {(_name(names or {}, k) if by == "tenant" else k): v * 100 for k, v in rates.items()}
        p.plots.append(bar_chart(f"Hit rate {title}", [Bar(label(k, blank), v) for k, v in sorted(shown.items())],
                                 category=by.replace("_", " "), value=HIT_RATE, maximum=100.0))
    return p


def quota_panel(uses: list[QuotaUse], names: Mapping[str, str]) -> Panel:
    p = Panel("quota", "Quota consumption (today / this month, UTC)")
    p.plots.append(bar_chart("Share of each limit used",
                             [Bar(f"{_name(names, u.tenant_id)} {u.limit_name}", u.share * 100) for u in uses],
                             category="tenant and limit", value=Axis("share of the limit used", "%"), maximum=100.0,
                             empty="no daily or monthly limit set"))
    p.columns = ["tenant", "limit", "used", "limit value", "used %"]
    p.rows = [[_name(names, u.tenant_id), u.limit_name, f"{u.used:.6g}", f"{u.limit:.6g}", f"{u.share * 100:.1f}"]
              for u in uses]
    if not uses:
        p.note = "No tenant has a daily or monthly limit."
    return p


def routing_panel(by_backend: dict[str, tuple[int, int]], backends: Mapping[str, Backend],
                  decisions: dict[str, int]) -> Panel:
    """Requests by where they ran: a local backend (company hardware), an external API, or none."""
    where: dict[str, int] = {"local": 0, "external": 0, "refused before a backend": 0, "unregistered": 0}
    p = Panel("routing", "Routing: local vs external")
    p.columns = ["backend", "where", "requests", "tokens"]
    for name, (n, tokens) in sorted(by_backend.items()):
        b = backends.get(name)
        kind = "refused before a backend" if not name else ("unregistered" if b is None else
                                                       ("local" if b.is_local else "external"))
        where[kind] += n
        p.rows.append([name or "-", kind, n, tokens])
    count = Axis("requests", "count")
    p.plots.append(bar_chart("Requests by where they ran", [Bar(k, v) for k, v in where.items() if v],
                             category="where", value=count))
    p.plots.append(bar_chart("Audited routing decisions", [Bar(k, v) for k, v in sorted(decisions.items())],
                             category="decision", value=Axis("decisions", "count")))
    return p


def engine_panel(reg: CollectorRegistry) -> Panel:
    """KV usage, queue, fairness, preemptions and speculative acceptance of the engines this replica runs."""
    p = Panel("engine", "Engine: KV cache, fairness, preemptions, speculative decoding")
    used = promstats.sum_by(reg, "fairgate_kv_blocks_used", "model")
    total = promstats.sum_by(reg, "fairgate_kv_blocks_total", "model")
    cached = promstats.sum_by(reg, "fairgate_kv_blocks_cached", "model")
    kv = Axis("KV blocks in use", "%")
    replicas = [Bar(f"{labels.get('pool', '') or '(no pool)'}/{labels.get('replica', '') or '?'}", v * 100)
                for labels, v in promstats.samples(reg, "fairgate_pool_replica_kv_usage")]
    if replicas:
        p.plots.append(bar_chart("KV use of pool replicas (last probe)", sorted(replicas, key=lambda b: b.label),
                                 category="pool/replica", value=kv, maximum=100.0))
    if not total:
        if not replicas:
            p.note = "No engine runs in this gateway process (engine servers show theirs at their /metrics)."
        return p
    p.plots.append(bar_chart("KV blocks in use", [Bar(label(m, "(no model)"), used.get(m, 0) / t * 100)
                                                  for m, t in total.items() if t],
                             category="model", value=kv, maximum=100.0))
    stat = {name: promstats.sum_by(reg, name, "model") for name in (
        "fairgate_requests_running", "fairgate_requests_waiting", "fairgate_preemptions_total",
        "fairgate_spec_draft_tokens_total", "fairgate_spec_accepted_tokens_total",
        "fairgate_fair_queue_backlogged_tenants")}
    jain = promstats.sum_by(reg, "fairgate_fairness_jain_index", "model")
    p.columns = ["model", "KV used / total", "cached blocks", "running", "waiting", "tenants waiting",
                 "fairness (Jain, last 15 s)", "preemptions", "spec acceptance"]
    for m, t in sorted(total.items()):
        drafts = stat["fairgate_spec_draft_tokens_total"].get(m, 0.0)
        accepted = stat["fairgate_spec_accepted_tokens_total"].get(m, 0.0)
        p.rows.append([m, f"{int(used.get(m, 0))} / {int(t)}", int(cached.get(m, 0)),
                       int(stat["fairgate_requests_running"].get(m, 0)), int(stat["fairgate_requests_waiting"].get(m, 0)),
                       int(stat["fairgate_fair_queue_backlogged_tenants"].get(m, 0)),
                       f"{jain[m]:.2f}" if m in jain else "-",
                       int(stat["fairgate_preemptions_total"].get(m, 0)),
                       f"{accepted / drafts * 100:.1f}%" if drafts else "off"])
    by_pos = promstats.sum_by(reg, "fairgate_spec_accepted_by_position_total", "position")
    if by_pos:
        verifies = promstats.total(reg, "fairgate_spec_drafts_total") or 0.0
        p.plots.append(bar_chart("Speculative acceptance by draft position",
                                 [Bar(f"position {k}", v / verifies * 100 if verifies else 0.0)
                                  for k, v in sorted(by_pos.items(), key=lambda kv: int(kv[0]))],
                                 category="draft position", value=Axis("drafts accepted", "%"), maximum=100.0))
    return p

