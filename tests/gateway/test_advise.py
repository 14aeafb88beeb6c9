"""`fairgate advise` on recorded scenarios (tests/fixtures/advise, made by
tools/record_advise_scenarios.py from real runs): the expected finding, lever and numbers for a
prefill-heavy route with a cache-missing prompt layout, a decode-bound engine at batch 1, a
memory-bound engine with preemptions, an embeddings route (input-only) and a route with too
little data; engine-wide findings said once for all routes; then the CLI end to end on SQLite
and PostgreSQL, and `GET /admin/advice` on a running gateway."""

from __future__ import annotations

import http.server
import json
import re
import subprocess
import sys
import threading
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import insert

from fairgate.gateway.dashboard.advice_text import AdviceItem, advice_items
from fairgate.gateway.observability.advise import (
    AdviseOptions,
    advice_json,
    advise_from,
    engine_windows,
    parse_window,
)
from fairgate.gateway.settings import Settings
from fairgate.gateway.store.db import make_engine
from fairgate.gateway.store.tables import UsageRecord
from fairgate.policies.advice import Advice, AdviceConfig
from tests.gateway.advise_fixtures import FIXTURES, Scenario
from tests.gateway.harness import ADMIN_TOKEN, ROOT, GatewayThread, pg_database

ROUTE = "/v1/chat/completions"


def _metric(text: str, name: str) -> float:
    """Sum of one series over its labels, read with a regex (not the collector's parser)."""
    return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? ([0-9.e+-]+)$", text, re.M))


def _delta(s: Scenario, name: str) -> float:
    return _metric(s.after, name) - _metric(s.before, name)


def _items(tmp_path, name: str) -> tuple[Scenario, list[Advice]]:
    """The scenario's advice over the hour up to its last row."""
    s = Scenario(name)
    url = f"sqlite:///{tmp_path}/{name}.db"
    s.load(url)
    engine = make_engine(url)
    try:
        return s, advise_from(engine, [s.after], [s.before], AdviseOptions(timedelta(hours=1)),
                              until=s.until + timedelta(seconds=1))
    finally:
        engine.dispose()


def _advice(tmp_path, name: str) -> tuple[Scenario, dict[str, dict]]:
    s, items = _items(tmp_path, name)
    by_finding = {a.finding: {"lever": a.lever, "route": a.route, "model": a.model, **a.numbers} for a in items}
    assert len(by_finding) == len(items)  # one advice per finding per (route, model) here
    return s, by_finding


def test_prefill_heavy_route_with_a_timestamp_before_the_shared_prompt(tmp_path):
    s, adv = _advice(tmp_path, "prefill_layout")
    rows = s.rows
    prompt = sum(r["prompt_tokens"] for r in rows)
    cached = sum(r["cached_tokens"] for r in rows)
    assert adv["prefill-heavy"]["lever"] is None
    assert adv["prefill-heavy"]["prompt_tokens_per_request"] == round(prompt / len(rows), 1)
    assert adv["prefill-heavy"]["prompt_to_completion"] == round(prompt / sum(r["completion_tokens"] for r in rows), 4)
    layout = adv["cache-missing prompt layout"]
    assert layout["lever"] == "prompt layout" and layout["route"] == ROUTE and layout["model"] == "tiny"
    assert layout["hit_rate"] == round(cached / prompt, 4) < 0.3
    assert layout["shared_shape_share"] == 1.0  # every prompt the same apart from its numbers
    assert layout["distinct_heads_on_shape"] == len({r["prefix_hash"] for r in rows}) == len(rows)
    assert layout["identical_head_share"] == round(1 / len(rows), 4)
    assert "memory-bound" not in adv and "decode-bound at batch 1" not in adv
    assert adv["KV pressure"]["preemptions"] == 0


def test_decode_bound_route_at_batch_one(tmp_path):
    s, adv = _advice(tmp_path, "decode_batch1")
    rows = s.rows
    assert adv["decode-heavy"]["completion_tokens_per_request"] == 48.0
    assert adv["decode-heavy"]["prompt_to_completion"] < 1
    bound = adv["decode-bound at batch 1"]
    assert bound["lever"] == "speculative decoding on"
    steps = _delta(s, "fairgate_engine_steps_total")
    assert bound["steps"] == steps == len(rows) * 48  # one token per step: nothing batched
    assert bound["mean_batch"] == round(_delta(s, "fairgate_engine_sampled_sequences_total") / steps, 4) == 1.0
    assert bound["spec_draft_tokens"] == 0
    assert adv["prefix hit rate"]["lever"] is None  # short prompts: not a layout problem
    assert "memory-bound" not in adv


def test_memory_bound_engine_with_preemptions(tmp_path):
    s, adv = _advice(tmp_path, "memory_bound")
    mem = adv["memory-bound"]
    assert mem["lever"] == "KV quantization"  # the tiny engine runs a float32 KV cache
    assert mem["preemptions"] == _delta(s, "fairgate_preemptions_total") > 0
    assert mem["preemptions_per_request"] == round(mem["preemptions"] / len(s.rows), 4)
    queue = _delta(s, "fairgate_queue_time_seconds_sum") / _delta(s, "fairgate_queue_time_seconds_count")
    assert mem["queue_s_mean"] == round(queue, 4)
    assert adv["batch size"]["mean_batch"] > 2  # concurrent: batched, so no speculation advice
    assert "cache-missing prompt layout" not in adv


def test_an_embeddings_route_is_input_only(tmp_path):
    s, adv = _advice(tmp_path, "embeddings")
    rows = s.rows
    assert {r["route"] for r in rows} == {"/v1/embeddings"} and all(r["completion_tokens"] == 0 for r in rows)
    only = adv["input-only"]
    assert only["route"] == "/v1/embeddings" and only["lever"] is None
    assert only["requests"] == len(rows) and only["completion_tokens"] == 0
    assert only["prompt_tokens_per_request"] == round(sum(r["prompt_tokens"] for r in rows) / len(rows), 1)
    # neither prefill- nor decode-heavy, no text or model lever, and no decode batch to judge
    assert not {"prefill-heavy", "decode-heavy", "decode-bound at batch 1", "batch size", "prefix hit rate",
                "smaller model"} & set(adv)
    assert adv["KV pressure"]["route"] == "*" and adv["KV pressure"]["preemptions"] == 0


def test_a_route_with_too_little_data_gets_no_verdict(tmp_path):
    s, items = _items(tmp_path, "too_little_data")
    assert len(s.rows) == 5 < AdviceConfig().min_requests
    # the route's rows and the engine's requests: too few for any verdict, replicas included
    said = {(a.route, a.model): a for a in items}
    assert len(said) == len(items) and {a.finding for a in items} == {"too little data"}
    assert set(said) == {(ROUTE, "tiny"), ("*", "tiny")}
    assert said[(ROUTE, "tiny")].message.startswith("too little data (5 requests)")
    assert said[(ROUTE, "tiny")].numbers == {"requests": 5, "min_requests": 20}
    assert said[("*", "tiny")].numbers["requests"] == _delta(s, "fairgate_requests_total") == 5


def test_engine_wide_findings_are_said_once_for_all_routes(tmp_path):
    s = Scenario("decode_batch1")
    url = f"sqlite:///{tmp_path}/two_routes.db"
    s.load(url)
    again = [dict(r, request_id=r["request_id"] + "-c", route="/v1/completions") for r in s.rows]
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(insert(UsageRecord), [Scenario._row(r) for r in again])
        items = advise_from(engine, [s.after], [s.before], AdviseOptions(timedelta(hours=1)),
                            until=s.until + timedelta(seconds=1))
    finally:
        engine.dispose()
    routes_of = {f: [a.route for a in items if a.finding == f] for f in {a.finding for a in items}}
    assert routes_of["decode-heavy"] == ["/v1/chat/completions", "/v1/completions"]  # each on its own rows
    assert routes_of["decode-bound at batch 1"] == ["*"] and routes_of["KV pressure"] == ["*"]
    bound = next(a for a in items if a.finding == "decode-bound at batch 1")
    assert "/v1/chat/completions, /v1/completions" in bound.message and bound.lever == "speculative decoding on"


SCENARIOS = ("prefill_layout", "decode_batch1", "memory_bound", "embeddings", "too_little_data")


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_dashboard_words_every_finding_as_a_sentence_with_its_numbers(tmp_path, name):
    s, items = _items(tmp_path, name)
    worded = advice_items(items)
    assert len(worded) == len(items) and all(isinstance(w, AdviceItem) for w in worded)
    for a, w in zip(items, worded, strict=True):
        assert w.title.endswith(f": {a.finding}") and (a.route in w.title or a.model in w.title)
        text = w.title + " " + w.sentence
        assert not {"{", "}", "': ", "_"} & set(re.findall(r"[{}_]|': ", text)), text  # no dict or key dump
        assert not w.sentence[0].islower() and w.sentence.endswith("."), w.sentence
        assert re.search(r"\d", w.sentence), w.sentence  # the numbers it rests on, in the sentence
        assert w.sentence != a.message  # worded by the panel, not the advisor's raw message
        assert w.lever == (a.lever or "")


def test_the_worded_findings_carry_their_own_numbers(tmp_path):
    _, items = _items(tmp_path, "decode_batch1")
    by = {a.finding: (a, w.sentence) for a, w in zip(items, advice_items(items), strict=True)}
    profile, words = by["decode-heavy"]
    decode = round((1 - profile.numbers["prefill_time_share"]) * 100)
    assert words.startswith(f"Decode takes {decode}% of the time on {ROUTE}:")
    batch, words = by["decode-bound at batch 1"]
    assert f"Decode takes {decode}% of the time on {ROUTE} at a mean batch of {batch.numbers['mean_batch']:.1f}" \
        in words and words.endswith("speculative decoding would help.")
    _, items = _items(tmp_path, "too_little_data")
    assert advice_items(items)[0].sentence == (f"Only 5 requests reached {ROUTE} in this window; "
                                               "at least 20 are needed before it is judged.")
    # the advisor's JSON (GET /admin/advice) words the same as the values
    assert advice_items(advice_json(items)) == advice_items(items)


def test_cli_text_names_input_only_sparse_routes_and_the_engine_once(tmp_path):
    url = f"sqlite:///{tmp_path}/mixed.db"
    for name in ("embeddings", "too_little_data"):
        Scenario(name).load(url)
    d = FIXTURES / "embeddings"
    out = _cli("--database", url, "--window", "3650d", "--metrics", str(d / "metrics_after.txt"),
               "--metrics-before", str(d / "metrics_before.txt"))
    assert out.returncode == 0, out.stderr[-2000:]
    blocks = {b.split("\n", 1)[0]: b for b in out.stdout.split("\n\n")}
    assert "[too little data] too little data (5 requests)" in blocks[f"{ROUTE}  model=tiny"]
    assert "[input-only] input-only (embeddings)" in blocks["/v1/embeddings  model=tiny"]
    engine = blocks["engine tiny (all its routes)"]
    assert "[KV pressure]" in engine and "[batch size]" in engine  # the chat rows generated: a batch to judge
    assert out.stdout.count("[KV pressure]") == 1


def test_replicas_by_hour_from_the_recorded_load(tmp_path):
    s, adv = _advice(tmp_path, "memory_bound")
    plan = adv["replicas by hour"]
    busy = _delta(s, "fairgate_engine_busy_seconds_total")
    tokens = sum(r["prompt_tokens"] + r["completion_tokens"] for r in s.rows)
    assert plan["capacity_tokens_per_s"] == round(tokens / busy, 3)
    assert plan["startup_s"] == int(_metric(s.after, "fairgate_engine_startup_seconds")) + 1
    hour = int(s.rows[0]["created_at"][11:13])
    assert plan["peak_tokens_per_s_by_hour"][hour] > 0 and plan["replicas_by_hour"] == [1] * 24


def test_a_restarted_engine_counts_from_zero_and_gateway_series_are_not_engines():
    s = Scenario("memory_bound")
    w = engine_windows([s.before], [s.after])  # counters went down: the engine restarted
    assert w["tiny"].preemptions == _metric(s.before, "fairgate_preemptions_total")
    assert engine_windows(['fairgate_prompt_tokens_total{tenant="t",route="r",backend="b",model="m",'
                           'priority="standard"} 5.0\n']) == {}


def test_window_parsing():
    assert parse_window("90m") == timedelta(minutes=90) and parse_window("7d") == timedelta(days=7)
    for bad in ("", "5", "-1h", "1y", "0h"):
        with pytest.raises(ValueError):
            parse_window(bad)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fairgate.gateway.cli", "advise", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize("db", ["sqlite", "postgres"])
def test_cli_end_to_end_on_a_real_database(tmp_path, db):
    import contextlib

    with contextlib.ExitStack() as es:
        url = es.enter_context(pg_database()) if db == "postgres" else f"sqlite:///{tmp_path}/cli.db"
        for name in ("prefill_layout", "memory_bound"):
            Scenario(name).load(url)  # two scenarios, one engine "tiny": their rows add up
        d = FIXTURES / "memory_bound"
        out = _cli("--database", url, "--window", "3650d", "--metrics", str(d / "metrics_after.txt"),
                   "--metrics-before", str(d / "metrics_before.txt"), "--json")
        assert out.returncode == 0, out.stderr[-2000:]
        items = json.loads(out.stdout)
        levers = {a["finding"]: a["lever"] for a in items}
        assert levers["memory-bound"] == "KV quantization"
        assert levers["prefill-heavy"] is None
        profile = next(a for a in items if a["finding"] == "prefill-heavy")
        assert profile["numbers"]["requests"] == 48  # 24 + 24 rows
        text = _cli("--database", url, "--window", "3650d", "--metrics", str(d / "metrics_after.txt"))
        assert text.returncode == 0 and "-> KV quantization" in text.stdout and "levers to pull:" in text.stdout
        bad = _cli("--database", url, "--window", "soon")
        assert bad.returncode == 2 and "window must look like" in bad.stderr


class _EngineMetrics(http.server.BaseHTTPRequestHandler):
    """Plays an engine server's GET /metrics with a recorded scrape."""

    body = b""

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        ok = self.path == "/metrics"
        self.send_response(200 if ok else 404)
        self.send_header("content-type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(self.body if ok else b"")

    def log_message(self, *args: object) -> None:
        return


def test_admin_advice_on_a_running_gateway(tmp_path):
    url = f"sqlite:///{tmp_path}/gw.db"
    Scenario("prefill_layout").load(url)
    memory = Scenario("memory_bound")
    rows = [dict(r, request_id=r["request_id"] + "-m", backend="eng", model="eng") for r in memory.rows]
    memory.rows = rows
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(insert(UsageRecord), [Scenario._row(r) for r in rows])
    engine.dispose()
    _EngineMetrics.body = memory.after.encode()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _EngineMetrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with GatewayThread(Settings(admin_token=ADMIN_TOKEN, database_url=url, embedded_engine=False)) as gw:
        h = {"authorization": f"Bearer {ADMIN_TOKEN}"}
        r = httpx.post(gw.url + "/admin/backends", headers=h, json={
            "name": "eng", "kind": "local", "base_url": f"http://127.0.0.1:{server.server_port}/v1"})
        assert r.status_code == 201, r.text
        assert httpx.get(gw.url + "/admin/advice").status_code == 401
        bad = httpx.get(gw.url + "/admin/advice", params={"window": "x"}, headers=h)
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "window"
        r = httpx.get(gw.url + "/admin/advice", params={"window": "3650d"}, headers=h)
        assert r.status_code == 200, r.text
        findings = {(a["model"], a["finding"]): a["lever"] for a in r.json()["data"]}
        assert findings[("tiny", "cache-missing prompt layout")] == "prompt layout"
        # the gateway read the local engine's /metrics itself, filed under the backend's name
        assert findings[("eng", "memory-bound")] == "KV quantization"
        assert ("tiny", "memory-bound") not in findings  # no engine metrics for "tiny": no KV finding
        out = subprocess.run([sys.executable, "-m", "fairgate.gateway.cli", "advise", "--gateway-url", gw.url, "--window",
                              "3650d", "--admin-token", ADMIN_TOKEN, "--json"], cwd=ROOT, capture_output=True,
                             text=True, timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
        assert out.returncode == 0, out.stderr
        assert {(a["model"], a["finding"]) for a in json.loads(out.stdout)} == set(findings)
    server.shutdown()


def test_an_engines_fairness_series_reach_its_window():
    """Issue 36: the fair queue's gauges at the window's end and the fairness preemptions (apart
    from the KV ones) in the window."""
    def scrape(kv: float, fair: float) -> str:
        return ("# TYPE fairgate_engine_steps_total counter\nfairgate_engine_steps_total{model=\"m\"} 10.0\n"
                "# TYPE fairgate_preemptions_total counter\n"
                f"fairgate_preemptions_total{{model=\"m\",cause=\"kv\"}} {kv}\n"
                f"fairgate_preemptions_total{{model=\"m\",cause=\"fairness\"}} {fair}\n"
                "# TYPE fairgate_fairness_jain_index gauge\nfairgate_fairness_jain_index{model=\"m\"} 0.75\n"
                "# TYPE fairgate_fair_queue_backlogged_tenants gauge\n"
                "fairgate_fair_queue_backlogged_tenants{model=\"m\",priority=\"interactive\"} 1.0\n"
                "fairgate_fair_queue_backlogged_tenants{model=\"m\",priority=\"standard\"} 2.0\n")
    w = engine_windows([scrape(5, 9)], [scrape(2, 4)])["m"]
    assert (w.preemptions, w.fairness_preemptions) == (3, 5)
    assert (w.jain, w.backlogged_tenants) == (0.75, 3)
