"""GET /metrics of a real gateway with its embedded engine: families, labels and counts agree
with the usage the requests got back; prefix-cache hits by prompt version; the
x-fairgate-overhead-ms header; the optional metrics token."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from fairgate.backends.prompt_version import system_prompt_hash
from tests.gateway.harness import ADMIN_TOKEN, embedded_gateway

SYSTEM = "You are the helpful assistant of the docs team; answer in one short sentence. " * 2
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    from prometheus_client.parser import text_string_to_metric_families

    return {(s.name, frozenset(s.labels.items())): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def scrape(url: str, requests: int) -> tuple[str, Samples]:
    """Metrics once `requests` requests are accounted (observers run after the response)."""
    for _ in range(200):
        r = httpx.get(url + "/metrics", headers={"authorization": f"Bearer {ADMIN_TOKEN}"})
        assert r.status_code == 200
        samples = parse(r.text)
        if value(samples, "fairgate_requests_total") >= requests:
            return r.text, samples
        time.sleep(0.05)
    raise AssertionError("requests never showed up in /metrics")


def chat(url: str, key: str, model: str, *, stream: bool = False, headers: dict[str, str] | None = None
         ) -> tuple[dict[str, Any], httpx.Headers]:
    body: dict[str, Any] = {"model": model, "max_tokens": 4, "temperature": 0, "ignore_eos": True, "messages": [
        {"role": "system", "content": SYSTEM}, {"role": "user", "content": "What is a quota?"}]}
    h = {"authorization": f"Bearer {key}", **(headers or {})}
    if not stream:
        r = httpx.post(url + "/v1/chat/completions", json=body, headers=h, timeout=120)
        assert r.status_code == 200, r.text
        return r.json()["usage"], r.headers
    body |= {"stream": True, "stream_options": {"include_usage": True}}
    usage = None
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, headers=h, timeout=120) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: {") and '"usage"' in line:
                usage = json.loads(line[6:])["usage"]
        assert usage is not None
        return usage, r.headers


def test_gateway_metrics_match_usage(tmp_path, tiny_model_dir):
    with embedded_gateway(tmp_path, tiny_model_dir, metrics_tenant_labels=True) as (gw, admin):
        model = tiny_model_dir.name
        a, b = admin.tenant(), admin.tenant()
        ka, kb = admin.key(a["id"])["key"], admin.key(b["id"])["key"]

        a1, h1 = chat(gw.url, ka, model)
        a2, _ = chat(gw.url, ka, model)
        a3, h3 = chat(gw.url, ka, model, stream=True, headers={"x-prompt-version": "docs v2"})
        b1, _ = chat(gw.url, kb, model, stream=True, headers={"x-priority": "batch"})
        for h in (h1, h3):
            assert float(h["x-fairgate-overhead-ms"]) >= 0
        text, m = scrape(gw.url, 4)

        base = {"route": "/v1/chat/completions", "backend": model, "model": model}
        ta = {"tenant": a["id"], **base, "priority": "standard"}
        tb = {"tenant": b["id"], **base, "priority": "batch"}
        assert value(m, "fairgate_prompt_tokens_total", **ta) == sum(u["prompt_tokens"] for u in (a1, a2, a3))
        assert value(m, "fairgate_generation_tokens_total", **ta) == sum(
            u["completion_tokens"] for u in (a1, a2, a3))
        assert value(m, "fairgate_prompt_tokens_total", **tb) == b1["prompt_tokens"]
        cached_a = [u["prompt_tokens_details"]["cached_tokens"] for u in (a1, a2, a3)]
        assert cached_a[0] == 0 and cached_a[1] > 32 and cached_a[2] > 32
        assert b1["prompt_tokens_details"]["cached_tokens"] == 0  # another tenant: its own cache
        assert value(m, "fairgate_cached_prompt_tokens_total", **ta) == sum(cached_a)

        version = system_prompt_hash({"messages": [{"role": "system", "content": SYSTEM}]})
        hits, queries = "fairgate_prefix_cache_hits_tokens_total", "fairgate_prefix_cache_queries_tokens_total"
        assert value(m, hits, tenant=a["id"], prompt_version=version, **base) == cached_a[1]
        assert value(m, queries, tenant=a["id"], prompt_version=version) == a1["prompt_tokens"] * 2
        assert value(m, hits, tenant=a["id"], prompt_version="docs_v2") == cached_a[2]  # header, cleaned
        assert value(m, hits, tenant=b["id"]) == 0
        assert "helpful assistant" not in text

        assert value(m, "fairgate_requests_total", **ta, status="finished", code="200") == 3
        assert value(m, "fairgate_e2e_request_latency_seconds_count", **ta) == 3
        assert value(m, "fairgate_gateway_overhead_seconds_count") == 4
        # TTFT and inter-token latency: one observation per request whose first token's time is
        # known — streamed or not, the embedded engine times it (an external API's whole answer: not)
        assert value(m, "fairgate_time_to_first_token_seconds_count", **ta) == 3
        assert value(m, "fairgate_time_to_first_token_seconds_count", **tb) == 1
        assert value(m, "fairgate_inter_token_latency_seconds_count") == sum(
            1 for u in (a1, a2, a3, b1) if u["completion_tokens"] > 1)
        # The embedded engine's gauges, read at scrape time.
        engine = gw.state.embedded.engine
        assert value(m, "fairgate_kv_blocks_total", model=model) == engine.stats().kv_blocks_total > 0
        assert value(m, "fairgate_requests_running") == 0 and value(m, "fairgate_kv_blocks_used") == 0

        gw.state.settings.metrics_token = "scrape-token"
        assert httpx.get(gw.url + "/metrics").status_code == 401
        ok = httpx.get(gw.url + "/metrics", headers={"authorization": "bearer scrape-token"})
        assert ok.status_code == 200 and "fairgate_gateway_overhead_seconds" in ok.text
