"""`fairgate bench` against real servers on loopback: a tiny-model `fairgate engine` and a
gateway in front of it (two tenants), compared side by side, plus a dead port. The report's
HTML must hold its plots, its JSON the figures, and every count must add up — against the
requests file and against the gateway's own usage rows."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from fairgate.gateway.cli import main
from fairgate.gateway.loadgen.report import PLOTS
from fairgate.gateway.settings import Settings
from tests.gateway.harness import ADMIN_TOKEN, Admin, GatewayThread, free_port
from tests.helpers.engine_proc import EngineProcess

MAX_TOKENS = 6


@pytest.fixture(scope="module")
def world(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    db = tmp_path_factory.mktemp("bench") / "gw.db"
    with EngineProcess(tiny_model_dir, "--max-num-batched-tokens", "256", "--max-model-len", "512",
                       "--metrics-tenant-labels") as engine, \
            GatewayThread(Settings(admin_token=ADMIN_TOKEN, database_url=f"sqlite:///{db}",
                                   embedded_engine=False, upstream_max_retries=0)) as gw:
        admin = Admin(gw.url)
        admin.backend("engine-a", engine.url + "/v1", kind="local", model="tiny")
        tenants = [admin.tenant(name=f"bench-{i}") for i in range(2)]
        keys = [admin.key(t["id"])["key"] for t in tenants]
        yield {"engine": engine.url, "gateway": gw.url, "admin": admin, "keys": keys,
               "tenant_ids": [t["id"] for t in tenants]}
        admin.close()


def _greedy(url: str, prompt: str) -> str:
    with openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=60) as c:
        return c.completions.create(model="tiny", prompt=prompt, max_tokens=4, temperature=0).choices[0].text


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _usage_requests(admin: Admin, tenant_id: str, want: int) -> int:
    """The gateway's usage-row count for a tenant, once it reaches `want` (rows settle after the
    response) or stops moving."""
    n, deadline = -1, time.time() + 15
    while time.time() < deadline:
        r = admin.client.get("/admin/usage", params={"tenant": tenant_id, "group_by": "backend"})
        assert r.status_code == 200, r.text
        n = sum(row["requests"] for row in r.json()["data"])
        if n >= want:
            return n
        time.sleep(0.1)
    return n


def _engine_requests_by_tenant(url: str) -> dict[str, float]:
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(httpx.get(url + "/metrics", timeout=30).text):
        for sample in family.samples:
            if sample.name == "fairgate_requests_total":
                tenant = sample.labels["tenant"]
                counts[tenant] = counts.get(tenant, 0) + sample.value
    return counts


def test_bench_compares_gateway_and_engine(world: dict[str, Any], tmp_path: Path, capsys) -> None:
    golden = tmp_path / "golden.jsonl"
    prompt = "The quick brown fox"
    golden.write_text(
        json.dumps({"id": "served", "prompt": prompt, "exact": _greedy(world["engine"], prompt), "max_tokens": 4})
        + "\n" + json.dumps({"id": "never", "prompt": "Hello", "contains": "no tiny model says this"}) + "\n")
    out = tmp_path / "report"
    argv = ["bench", "--base-url", world["gateway"], "--label", "gateway", "--model", "engine-a",
            "--base-url", world["engine"], "--label", "engine", "--model", "tiny",
            "--api-key", world["keys"][0], "--api-key", world["keys"][1],
            "--workload", "mixed", "--scale", "0.05", "--max-tokens", str(MAX_TOKENS), "--ignore-eos",
            "--concurrency", "1,3", "--duration", "1.2", "--slo-ttft", "60000", "--slo-itl", "60000",
            "--golden", str(golden), "--out", str(out), "--progress", "off"]
    assert main(argv) == 0
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["html"] == str(out / "report.html") and last["completed"] > 0

    page = (out / "report.html").read_text()
    for name in PLOTS:
        start = page.index(f'<figure data-plot="{name}">')
        assert page.index("<svg", start) < page.index("</figure>", start), name
    assert "<script" not in page and "<link" not in page and 'src="' not in page  # nothing to fetch

    doc = json.loads((out / "bench.json").read_text())
    rows = _rows(out / "requests.jsonl")
    assert set(doc["targets"]) == {"gateway", "engine"}
    for label, tf in doc["targets"].items():
        mine = [r for r in rows if r["target"] == label]
        assert tf["overall"]["sent"] == len(mine) == tf["overall"]["completed"] + tf["overall"]["errors"]
        for level in ("c=1", "c=3"):
            g = tf["levels"][level]
            assert g["sent"] == tf["sent_by_level"][level] == sum(1 for r in mine if r["level"] == level)
            assert g["sent"] == g["completed"] + g["errors"] and g["completed"] > 0
            assert g["output_tokens"] == MAX_TOKENS * g["completed"]  # ignore_eos: exact lengths
            assert g["ttft"]["p50"] <= g["ttft"]["p95"] <= g["ttft"]["p99"] <= g["ttft"]["max"]
            assert g["itl"]["count"] > 0 and g["goodput"] <= g["request_throughput"]
            assert g["slo_met"] == g["completed"]  # a 60 s objective: every completed request meets it
        assert sum(g["sent"] for g in tf["by_tenant"].values()) == len(mine) and set(tf["by_tenant"]) == {"0", "1"}
        assert sum(g["sent"] for g in tf["by_prompt_bucket"].values()) == len(mine)
        assert tf["accuracy"]["items"] == 2 and tf["accuracy"]["passed"] == 1
        assert [r["passed"] for r in tf["accuracy"]["results"]] == [True, False]
        assert len(tf["cdf"]["ttft"]) == min(200, tf["overall"]["ttft"]["count"])
    # the route: the gateway names the backend that served; the engine answers with its model
    assert set(doc["targets"]["gateway"]["by_route"]) == {"engine-a"}
    assert set(doc["targets"]["engine"]["by_route"]) == {"tiny"}
    # the gateway's usage rows agree: one per request; the warm-up request and the golden set
    # went with the first key
    gw_rows = [r for r in rows if r["target"] == "gateway"]
    assert doc["config"]["warmup"] == 1
    for i, tenant_id in enumerate(world["tenant_ids"]):
        want = sum(1 for r in gw_rows if r["tenant"] == i) + (1 + 2 if i == 0 else 0)
        assert _usage_requests(world["admin"], tenant_id, want) == want
    assert world["keys"][0] not in (out / "bench.json").read_text() + page


def test_bench_request_count_rate_mode_and_a_dead_target(world: dict[str, Any], tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    out = tmp_path / "r"
    argv = ["bench", "--base-url", world["engine"], "--base-url", dead, "--model", "tiny", "--tenants", "2",
            "--requests", "5", "--rate", "50,inf", "--rounds", "2", "--max-tokens", "3", "--scale", "0.05",
            "--out", str(out), "--progress", "off"]
    assert main(argv) == 0
    doc = json.loads((out / "bench.json").read_text())
    live, gone = doc["targets"].values()
    # the engine saw each request under the tenant the bench named in x-tenant
    finished = _engine_requests_by_tenant(world["engine"])
    assert {t: finished.get(f"bench-{t}", 0) for t in ("0", "1")} == {
        t: g["completed"] for t, g in live["by_tenant"].items()} == {"0": 6, "1": 4}
    for level in ("rate=50", "rate=inf"):
        assert live["levels"][level]["sent"] == 5 == live["levels"][level]["completed"]
        assert gone["levels"][level]["sent"] == 5 == gone["levels"][level]["errors"]
    assert gone["errors"] == {"APIConnectionError": 10} and gone["overall"]["completed"] == 0
    assert gone["levels"]["rate=50"]["request_throughput"] == 0.0


def test_bench_refuses_bad_arguments(capsys) -> None:
    assert main(["bench", "--base-url", "http://127.0.0.1:1", "--model", "a", "--model", "b",
                 "--model", "c", "--base-url", "http://127.0.0.1:2"]) == 2
    assert "--model" in capsys.readouterr().err
    assert main(["bench", "--base-url", "http://127.0.0.1:1", "--model", "a", "--concurrency", "0"]) == 2
    assert main(["bench", "--base-url", "http://127.0.0.1:1", "--model", "a", "--rate", "inf",
                 "--duration", "5"]) == 2
    assert "--rate inf" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["bench", "--base-url", "http://127.0.0.1:1", "--model", "a", "--workload", "nope"])


def test_gateway_names_the_serving_backend(world: dict[str, Any]) -> None:
    """The route `fairgate bench` groups by: the gateway's x-fairgate-backend header, streamed or not."""
    body = {"model": "engine-a", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}
    auth = {"authorization": f"Bearer {world['keys'][0]}"}
    with httpx.Client(base_url=world["gateway"], headers=auth, timeout=60) as http:
        whole = http.post("/v1/chat/completions", json=body)
        assert whole.status_code == 200 and whole.headers["x-fairgate-backend"] == "engine-a"
        with http.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as streamed:
            assert streamed.status_code == 200 and streamed.headers["x-fairgate-backend"] == "engine-a"
            streamed.read()


def test_flood_scenario_reports_what_a_light_tenant_notices(world: dict[str, Any], tmp_path: Path, capsys) -> None:
    """Issue 36: `--scenario flood` sends the light tenant (first key) alone, then beside a flooding
    tenant (second key) at four times its rate, through the gateway; the light tenant's TTFT
    ratios and the flood's tokens/s come out per target, in the JSON and on the last line."""
    out = tmp_path / "flood"
    argv = ["bench", "--base-url", world["gateway"], "--label", "gateway", "--model", "engine-a",
            "--api-key", world["keys"][0], "--api-key", world["keys"][1], "--scenario", "flood",
            "--rate", "4", "--flood-factor", "4", "--duration", "1.5", "--workload", "chat", "--scale", "0.05",
            "--max-tokens", str(MAX_TOKENS), "--ignore-eos", "--out", str(out), "--progress", "off"]
    assert main(argv) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    last = json.loads(printed[-1])
    doc = json.loads((out / "bench.json").read_text())
    rows = _rows(out / "requests.jsonl")
    flood = doc["targets"]["gateway"]["flood"]
    assert [lv["label"] for lv in doc["config"]["levels"]] == ["alone", "flood=16"]
    # alone: the light tenant only; beside the flood: both, the flooder the larger share
    assert {r["tenant"] for r in rows if r["level"] == "alone"} == {0}
    beside = [r for r in rows if r["level"] == "flood=16"]
    assert {r["tenant"] for r in beside} == {0, 1}
    assert sum(r["tenant"] == 1 for r in beside) > sum(r["tenant"] == 0 for r in beside)
    assert flood["flood_sent"] == sum(r["tenant"] == 1 for r in beside) and flood["flood_errors"] == 0
    assert flood["light_alone_ttft"]["count"] == sum(r["ok"] and r["tenant"] == 0 for r in rows
                                                     if r["level"] == "alone")
    alone_p99, beside_p99 = flood["light_alone_ttft"]["p99"], flood["light_flood_ttft"]["p99"]
    assert flood["light_p99_vs_alone"] == round(beside_p99 / alone_p99, 3)
    assert flood["flood_output_throughput"] > 0
    assert last["flood"]["gateway"]["light_p99_vs_alone"] == flood["light_p99_vs_alone"]
    assert any("light ttft99" in line for line in printed)
    # the gateway billed each request to the tenant that sent it
    for i, tenant_id in enumerate(world["tenant_ids"]):
        want = sum(1 for r in rows if r["tenant"] == i)
        assert _usage_requests(world["admin"], tenant_id, want) >= want


def test_flood_scenario_needs_two_tenants_and_a_duration(world: dict[str, Any], tmp_path: Path, capsys) -> None:
    base = ["bench", "--base-url", world["engine"], "--model", "tiny", "--scenario", "flood", "--rate", "2",
            "--out", str(tmp_path / "x"), "--progress", "off"]
    assert main([*base, "--tenants", "2"]) == 2  # no --duration
    assert "--duration" in capsys.readouterr().err
    assert main([*base, "--duration", "1"]) == 2  # one tenant
    assert "two tenants" in capsys.readouterr().err
