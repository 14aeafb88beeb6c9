"""The dashboard's figures on fixed inputs: percentiles from histogram buckets, ratios from a
real registry, the SVG marks (values and escaping), and the database figures over a fixed
synthetic usage history (window buckets, totals, cost per million, quota shares)."""

from __future__ import annotations

import re
from datetime import datetime

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram

from fairgate.gateway.dashboard import data, promstats, tenant_panels
from fairgate.gateway.dashboard.panels import label
from fairgate.gateway.dashboard.svg import Axis, Bar, Series, bar_chart, line_chart
from fairgate.gateway.store.db import make_engine, make_sessionmaker, upgrade
from fairgate.gateway.store.tables import QuotaPolicy, Tenant, UsageRecord


def test_quantiles_interpolate_inside_the_bucket():
    b = promstats.Buckets({0.1: 2, 0.5: 6, 1.0: 8, float("inf"): 8}, total=8)
    assert b.quantile(0.5) == pytest.approx(0.1 + 0.4 * (2 / 4))
    assert b.quantile(0.95) == pytest.approx(0.5 + 0.5 * (1.6 / 2))
    assert promstats.Buckets({0.1: 1, float("inf"): 4}, total=4).quantile(0.9) == 0.1  # past the last bound
    assert promstats.Buckets().quantile(0.5) is None


def test_histograms_and_ratios_from_a_registry():
    reg = CollectorRegistry()
    h = Histogram("lat_seconds", "x", ["route", "tenant"], registry=reg, buckets=(0.1, 0.2, 0.4))
    for v in (0.05, 0.15, 0.15, 0.3):
        h.labels("/a", "t1").observe(v)
    h.labels("/b", "t2").observe(0.05)
    groups = promstats.histograms(reg, "lat_seconds", "route")
    assert groups["/a"].total == 4 and groups["/b"].total == 1
    assert groups["/a"].quantile(0.5) == pytest.approx(0.1 + 0.1 * (1 / 2))
    assert promstats.histograms(reg, "lat_seconds", "route", {"tenant": "t2"}).keys() == {"/b"}
    hits = Counter("hits", "x", ["route"], registry=reg)
    queries = Counter("queries", "x", ["route"], registry=reg)
    hits.labels("/a").inc(30)
    queries.labels("/a").inc(120)
    queries.labels("/b").inc(0)
    assert promstats.ratio_by(reg, "hits_total", "queries_total", "route") == {"/a": 0.25}


def test_svg_marks_carry_values_and_escape_client_text():
    svg = line_chart("t", [Series("<script>alert(1)</script>", [("h1", 3.0), ("h2", 5.0)])],
                     x=Axis("hour", "UTC"), y=Axis("tokens", "per hour"))
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    assert svg.count('class="point"') == 2 and 'data-value="5"' in svg
    bars = bar_chart("b", [Bar("x", 25.0), Bar("y", 0.0)], category="route", value=Axis("hit rate", "%"),
                     maximum=100.0)
    assert bars.count('class="bar"') == 2 and 'data-value="25"' in bars
    empty = bar_chart("empty", [], category="route", value=Axis("latency", "ms"))
    assert 'data-kind="bar"' in empty and "no data yet" in empty
    assert "all 3 refused" in bar_chart("e", [], category="route", value=Axis("latency", "ms"), empty="all 3 refused")


def test_every_plot_names_its_axes_with_units_and_labels_every_series_and_bar():
    line = line_chart("Tokens per tenant", [Series("team-a", [("09", 1.0)]), Series("team-b", [("09", 2.0)])],
                      x=Axis("hour", "UTC"), y=Axis("tokens", "per hour"))
    assert "<title>Tokens per tenant</title>" in line
    assert re.findall(r'data-axis="(\w)"[^>]*>([^<]+)<', line) == [("y", "tokens (per hour)"), ("x", "hour (UTC)")]
    assert re.findall(r'class="legend" data-series="([^"]+)"', line) == ["team-a", "team-b"]
    bars = bar_chart("TTFT by route", [Bar("/v1/chat p50", 12.0), Bar("/v1/chat p95", 30.0)],
                     category="route and percentile", value=Axis("latency", "ms"))
    assert re.findall(r'data-axis="(\w)"[^>]*>([^<]+)<', bars) == [("y", "route and percentile"), ("x", "latency (ms)")]
    assert re.findall(r'class="bar-label"[^>]*>([^<]+)<', bars) == ["/v1/chat p50", "/v1/chat p95"]
    assert "12 ms" in bars and "30 ms" in bars  # each value with its unit
    # an unlabelled plot cannot be drawn: no blank bar, series, axis or unit
    for make in (lambda: Bar(" ", 1.0), lambda: Series("", []), lambda: Axis("latency", ""), lambda: Axis("", "ms"),
                 lambda: bar_chart("t", [], category="", value=Axis("latency", "ms"))):
        with pytest.raises(ValueError, match="must not be blank"):
            make()
    assert label("", "(no route)") == "(no route)" and label("/v1/x", "(no route)") == "/v1/x"


@pytest.fixture
def history(tmp_path):
    """Two tenants over three hours of 1 Dec 2026; tenant a has daily and monthly limits."""
    url = f"sqlite:///{tmp_path}/h.db"
    upgrade(url)
    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    with sessions() as s:
        s.add_all([Tenant(id="a", name="team-a"), Tenant(id="b", name="team-b")])
        s.flush()
        s.add(QuotaPolicy(tenant_id="a", daily_tokens=1000, monthly_tokens=10_000, monthly_cost=2.0))
        rows = [("a", datetime(2026, 12, 1, 9, 5), 100, 50, 0.30), ("a", datetime(2026, 12, 1, 9, 40), 60, 40, 0.20),
                ("a", datetime(2026, 12, 1, 11, 0), 200, 100, 0.50), ("b", datetime(2026, 12, 1, 10, 30), 10, 10, 0.01),
                ("a", datetime(2026, 11, 30, 23, 0), 500, 0, 0.0)]  # yesterday: this month, not today
        for i, (t, at, p, c, cost) in enumerate(rows):
            s.add(UsageRecord(request_id=f"r{i}", tenant_id=t, key_prefix="fg-x", model="m", backend="local-1",
                              priority="standard", status="finished", prompt_tokens=p, completion_tokens=c,
                              total_tokens=p + c, cost=cost, created_at=at))
        s.commit()
    yield sessions
    engine.dispose()


def test_usage_window_totals_and_cost_per_million(history):
    start, end, group_by = data.window(3, now=datetime(2026, 12, 1, 11, 59))
    assert group_by == "hour"
    with history() as s:
        u = data.usage(s, None, start, end, group_by)
    assert u.buckets == ["2026-12-01T08:00:00", "2026-12-01T09:00:00", "2026-12-01T10:00:00", "2026-12-01T11:00:00"]
    a = u.totals["a"]
    assert (a["requests"], a["prompt_tokens"], a["completion_tokens"], a["total_tokens"]) == (3, 360, 190, 550)
    assert a["cost"] == pytest.approx(1.0) and a["cost_per_million_tokens"] == pytest.approx(1.0 / 550 * 1e6)
    assert u.totals["b"]["total_tokens"] == 20
    assert [(r["tenant_id"], r["group"], r["total_tokens"]) for r in u.rows] == [
        ("a", "2026-12-01T09:00:00", 250), ("a", "2026-12-01T11:00:00", 300), ("b", "2026-12-01T10:00:00", 20)]
    assert data.window(24 * 7)[2] == "day"


def test_quota_use_today_and_this_month(history):
    with history() as s:
        uses = data.quota_use(s, None, now=datetime(2026, 12, 1, 12, 0))
        assert data.quota_use(s, "b", now=datetime(2026, 12, 1, 12, 0)) == []
        by_backend = data.requests_by_backend(s, "a", datetime(2026, 12, 1), datetime(2026, 12, 2))
    shares = {u.limit_name: (u.used, u.limit, u.share) for u in uses}
    # today (1 Dec): 150 + 100 + 300 = 550 of 1000; December so far: the same 550 (30 Nov is November)
    assert shares["daily_tokens"] == (550, 1000, 0.55)
    assert shares["monthly_tokens"] == (550, 10_000, 0.055)
    assert shares["monthly_cost"][0] == pytest.approx(1.0) and shares["monthly_cost"][2] == pytest.approx(0.5)
    assert by_backend == {"local-1": (3, 550)}


def test_a_tenants_own_figures_leave_refusals_out_of_latency(history):
    chat = "/v1/chat/completions"
    with history() as s:
        for i, (backend, status, ttft, latency, prompt, cached, code) in enumerate([
                ("local-1", 200, 10.0, 100.0, 40, 30, None), ("local-1", 200, 30.0, 300.0, 60, 0, None),
                (None, 429, None, 0.5, 0, 0, "quota_exceeded"),
                ("local-1", 400, None, 1.0, 0, 0, "context_length_exceeded"),
                (None, 400, None, 0.7, 0, 0, None)]):  # a row from before error codes were kept
            s.add(UsageRecord(request_id=f"b{i}", tenant_id="b", key_prefix="fg-x", model="m", backend=backend,
                              priority="standard", status="finished", http_status=status, ttft_ms=ttft,
                              latency_ms=latency, prompt_tokens=prompt, cached_tokens=cached, route=chat,
                              error_code=code, created_at=datetime(2026, 12, 1, 10, 40)))
        s.commit()
        req = data.tenant_requests(s, "b", datetime(2026, 12, 1), datetime(2026, 12, 2))
        none = data.tenant_requests(s, "b", datetime(2026, 11, 1), datetime(2026, 11, 2))
    # the old row of b (no route, no TTFT) and two answered chats; three refusals only counted
    assert {k: sorted(v) for k, v in req.latency_ms.items()} == {"(no route)": [0.0], chat: [100.0, 300.0]}
    assert sorted(req.ttft_ms[chat]) == [10.0, 30.0] and req.ttft_ms.keys() == {chat}
    assert req.refused == {(400, "context_length"): 1, (400, ""): 1, (429, "quota"): 1}
    assert (req.served, req.total) == (3, 6)
    assert (req.prompt_tokens[chat], req.cached_tokens[chat]) == (100, 30)
    latency = tenant_panels.latency_panel(req, "Your")
    assert latency.title.startswith("Your latency")
    assert ["TTFT", chat, 2, "20.0", "29.0", "29.8"] in latency.rows  # p50 of 10 and 30, linear
    assert ["end-to-end", chat, 2, "200.0", "290.0", "298.0"] in latency.rows
    assert "3 refused requests are left out" in latency.note and "1 quota (HTTP 429)" in latency.note
    assert "1 context length (HTTP 400)" in latency.note  # its error code says which
    assert "1 validation or context length (HTTP 400)" in latency.note  # the old row: its status only
    cache = tenant_panels.cache_panel(req, "Your")
    assert [chat, 100, 30, "30.0%"] in cache.rows and 'data-value="30"' in "".join(cache.plots)
    assert "no data yet" not in "".join(latency.plots + cache.plots)
    assert all("no data yet" in plot for plot in tenant_panels.latency_panel(none, "Your").plots)
    refused_only = data.TenantRequests(refused={(429, "quota"): 4})
    assert "all 4 requests in this window were refused" in "".join(tenant_panels.cache_panel(refused_only, "Your").plots)
    assert tenant_panels.percentile([5.0], 0.99) == 5.0
