"""The real cost over HTTP: prices set through the admin API, an engine server's measured
weights read from its /stats, the synthetic history of test_cost.py in the database, and the
same hand-computed figures in /admin/usage (JSON and CSV), /admin/usage/costs and /metrics."""

from __future__ import annotations

import csv
import io
from datetime import datetime

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import update

from fairgate.gateway.store.pool_tables import PoolRow
from fairgate.gateway.store.tables import BackendRow
from tests.gateway.harness import ADMIN_TOKEN
from tests.gateway.test_cost import DAY, HISTORY, approx, usage_row
from tests.helpers.upstream import UpstreamBehaviour, UpstreamServer

WINDOW = "from=2026-11-30T08:00:00Z&to=2026-11-30T12:00:00Z"
ENGINE_STATS = {"step_costs": {"prefill_s_per_token": 0.0005, "decode_s_per_step": 0.02, "steps": 100,
                               "method": "regression"}}


@pytest.fixture
def engine_server():
    """An engine server's /stats, played by our loopback server."""
    with UpstreamServer(UpstreamBehaviour(stats=ENGINE_STATS)) as up:
        yield up


def priced_gateway(make_gateway, engine_server, upstream):
    gw, admin = make_gateway()
    admin.backend("gpu", engine_server.base_url, kind="local", hourly_cost_usd=3.5)
    admin.backend("box", upstream.base_url)
    admin.backend("ext", upstream.base_url, input_cost_per_mtok=5, output_cost_per_mtok=30)
    r = admin.client.patch("/admin/prices/box", json={"hourly_cost_usd": 2.0})
    assert r.status_code == 200 and r.json()["hourly_cost_usd"] == 2.0 and r.json()["input_cost_per_mtok"] == 0
    r = admin.client.post("/admin/pools", json={"name": "spare", "kind": "local", "hourly_cost_usd": 1.0})
    assert r.status_code == 201 and r.json()["hourly_cost_usd"] == 1.0
    with gw.state.sessions.begin() as s:
        s.execute(update(BackendRow).where(BackendRow.name == "gpu").values(created_at=DAY))
        s.execute(update(BackendRow).where(BackendRow.name == "box").values(created_at=datetime(2026, 11, 1)))
        s.execute(update(PoolRow).where(PoolRow.name == "spare").values(created_at=DAY.replace(hour=10)))
        s.add_all(usage_row(*h, n=i) for i, h in enumerate(HISTORY))
    return gw, admin


def test_admin_usage_shows_the_real_cost(make_gateway, engine_server, upstream):
    gw, admin = priced_gateway(make_gateway, engine_server, upstream)
    body = admin.client.get(f"/admin/usage?{WINDOW}&group_by=hour").json()
    assert body["window"] == {"from": "2026-11-30T08:00:00Z", "to": "2026-11-30T12:00:00Z"}
    assert [(r["tenant_id"], r["group"], r["cost"], r["cost_per_million_tokens"]) for r in body["data"]] == [
        ("ta", "2026-11-30T08:00:00", approx(7.2), approx(6000)),
        ("ta", "2026-11-30T09:00:00", approx(3.6), approx(6000)),
        ("ta", "2026-11-30T10:00:00", approx(8.0), approx(20_000)),
        ("tb", "2026-11-30T08:00:00", approx(3.2), approx(3.2 / 2050 * 1e6)),
        ("tb", "2026-11-30T11:00:00", approx(0.02), approx(0.02 / 1500 * 1e6)),
    ]
    assert [(g["group"], g["cost"]) for g in body["groups"]] == [
        ("2026-11-30T08:00:00", approx(10.4)), ("2026-11-30T09:00:00", approx(3.6)),
        ("2026-11-30T10:00:00", approx(8.0)), ("2026-11-30T11:00:00", approx(0.02))]
    b = {x["backend"]: x for x in body["backends"]}
    assert b["gpu"]["weights"]["source"] == "measured"  # read from the engine server's /stats
    assert b["gpu"]["weights"]["prefill_per_token"] == 0.0005 and b["gpu"]["weights"]["decode_per_step"] == 0.02
    assert b["box"]["weights"]["source"] == "default"  # no engine of ours behind it: said so
    assert [(t["tenant_id"], t["cost"]) for t in b["gpu"]["tenants"]] == [("ta", approx(10.8)), ("tb", approx(3.2))]
    assert b["gpu"]["idle_share"] == approx(236 / 240) and b["spare"]["cost"] == approx(2.0)
    assert b["gpu"]["cost_per_million_generated_tokens"] == approx(40_000)
    assert "up" not in b  # list prices, unused: nothing to show

    rows = list(csv.DictReader(io.StringIO(admin.client.get(f"/admin/usage?{WINDOW}&group_by=backend&format=csv").text)))
    assert [(r["tenant_id"], r["group"], float(r["cost"]), float(r["cost_per_million_tokens"])) for r in rows] == [
        ("ta", "box", approx(8.0), approx(20_000)), ("ta", "gpu", approx(10.8), approx(6000)),
        ("tb", "ext", approx(0.02), approx(0.02 / 1500 * 1e6)), ("tb", "gpu", approx(3.2), approx(3.2 / 2050 * 1e6))]
    groups = list(csv.DictReader(io.StringIO(admin.client.get(
        f"/admin/usage?{WINDOW}&group_by=backend&format=csv&view=groups").text)))
    assert [(g["group"], float(g["cost"]), float(g["cost_per_million_tokens"])) for g in groups] == [
        ("box", approx(8.0), approx(20_000)), ("ext", approx(0.02), approx(0.02 / 1500 * 1e6)),
        ("gpu", approx(14.0), approx(14 / 3850 * 1e6))]
    assert "tenant_id" not in groups[0]
    costs = list(csv.DictReader(io.StringIO(admin.client.get(f"/admin/usage/costs?{WINDOW}&format=csv").text)))
    gpu = next(r for r in costs if r["backend"] == "gpu")
    assert float(gpu["cost"]) == approx(14.0) and float(gpu["idle_hours"]) == approx(236 / 60)
    assert float(gpu["cost_per_million_tokens"]) == approx(14 / 3850 * 1e6)


def test_cost_in_metrics(make_gateway, engine_server, upstream):
    gw, admin = priced_gateway(make_gateway, engine_server, upstream)
    samples = {}
    for family in text_string_to_metric_families(httpx.get(gw.url + "/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    # the last hour: the history is older, so each machine was paid for an idle hour
    assert samples[("fairgate_backend_hourly_cost_usd", (("backend", "gpu"),))] == 3.5
    assert samples[("fairgate_backend_cost_usd", (("backend", "gpu"),))] == approx(3.5)
    assert samples[("fairgate_backend_idle_share", (("backend", "spare"),))] == 1.0
    assert ("fairgate_backend_cost_per_million_tokens", (("backend", "gpu"), ("tokens", "total"))) not in samples


def test_bad_parameters_are_openai_errors(make_gateway, engine_server, upstream):
    gw, admin = make_gateway()
    for query, param in [("group_by=week", "group_by"), ("format=xml", "format"), ("from=yesterday", "from"),
                         ("view=all", "view"),
                         ("from=2026-11-30T12:00:00Z&to=2026-11-30T08:00:00Z", "to")]:
        r = admin.client.get(f"/admin/usage?{query}")
        assert r.status_code == 400 and r.json()["error"]["param"] == param, query
    assert admin.client.get("/admin/usage/costs?format=xml").status_code == 400
    r = admin.client.patch("/admin/prices/nope", json={"hourly_cost_usd": 1.0})
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    r = admin.client.patch("/admin/prices/up", json={"hourly_cost_usd": -1})
    assert r.status_code == 400 and r.json()["error"]["param"] == "hourly_cost_usd"
    r = admin.client.patch("/admin/prices/up", json={"hourly_cost": 1})
    assert r.status_code == 400 and r.json()["error"]["param"] == "hourly_cost"
    r = admin.client.post("/admin/backends", json={"name": "x", "base_url": "http://h/v1", "hourly_cost_usd": "a"})
    assert r.status_code == 400


def test_embedded_engine_weights_are_measured(tmp_path, tiny_model_dir):
    import time

    from tests.gateway.harness import embedded_gateway

    with embedded_gateway(tmp_path, tiny_model_dir, embedded_hourly_cost_usd=1.8) as (gw, admin):
        name = tiny_model_dir.name
        for words, n in (("merhaba", 6), ("a much longer question with many more prompt words " * 4, 2)):
            t = admin.tenant()
            key = admin.key(t["id"])["key"]
            r = httpx.post(gw.url + "/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                           timeout=120, json={"model": name, "messages": [{"role": "user", "content": words}],
                                              "max_tokens": n, "temperature": 0, "ignore_eos": True})
            assert r.status_code == 200, r.text
        deadline = time.time() + 10
        while gw.state.usage.written < 2 and time.time() < deadline:
            time.sleep(0.05)
        body = admin.client.get("/admin/usage?group_by=backend").json()
        measured = gw.state.embedded.engine.step_costs()
    b = next(x for x in body["backends"] if x["backend"] == name)
    w = b["weights"]
    assert w["source"] == "measured" and w["prefill_per_token"] == measured.prefill_s_per_token
    assert w["decode_per_step"] == measured.decode_s_per_step and w["steps"] == measured.steps
    assert b["cost"] == approx(b["hours"] * 1.8) and 0 < b["hours"] <= 1  # from the hour of its first use
    # each tenant pays by the engine time its tokens used, with the measured weights
    engine_seconds = sum(t["engine_seconds"] for t in b["tenants"])
    assert len(b["tenants"]) == 2
    for t in b["tenants"]:
        assert t["engine_seconds"] == approx(t["prompt_tokens"] * w["prefill_per_token"]
                                             + t["completion_tokens"] * w["decode_per_step"])
        assert t["cost"] == approx(b["cost"] * t["engine_seconds"] / engine_seconds)
    assert sum(t["cost"] for t in b["tenants"]) == approx(b["cost"])


def test_a_tenant_reads_its_share(make_gateway, engine_server, upstream):
    gw, admin = make_gateway()
    admin.backend("gpu", engine_server.base_url, kind="local", hourly_cost_usd=3.5)
    t = admin.tenant()
    key = admin.key(t["id"])["key"]
    with gw.state.sessions.begin() as s:
        s.execute(update(BackendRow).where(BackendRow.name == "gpu").values(created_at=DAY))
        s.add_all(usage_row(b, t["id"] if who == "ta" else who, *rest, n=i)
                  for i, (b, who, *rest) in enumerate(HISTORY) if b == "gpu")
    r = httpx.get(gw.url + f"/v1/usage?{WINDOW}&group_by=hour", headers={"authorization": f"Bearer {key}"})
    body = r.json()
    assert r.status_code == 200 and "backends" not in body  # other tenants' shares stay private
    assert [(x["group"], x["cost"]) for x in body["data"]] == [
        ("2026-11-30T08:00:00", approx(7.2)), ("2026-11-30T09:00:00", approx(3.6))]
