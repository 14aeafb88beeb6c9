"""GET /metrics of a real engine server (uvicorn on loopback): metric families, labels and
counts agree with the usage the requests got back; prefix-cache hits grow on a repeated prompt
and are labelled by prompt version (header, else a hash of the system prompt, never its text)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from fairgate.backends.local.engine.async_engine import AsyncEngine, EngineConfig
from fairgate.backends.local.serving.backend import LocalBackend
from fairgate.backends.local.serving.server import build_app
from fairgate.backends.metrics_access import MetricsAccess
from fairgate.backends.prompt_version import system_prompt_hash
from tests.helpers.app_thread import serve_app

SYSTEM = "You are the helpful assistant of the docs team; answer in one short sentence. " * 2


@contextlib.contextmanager
def serve(app: Any) -> Iterator[str]:
    """`app` under uvicorn on loopback; its base URL."""
    with serve_app(app) as (url, _):
        yield url


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(http: httpx.Client) -> tuple[str, Samples]:
    r = http.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    out: Samples = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return r.text, out


def value(samples: Samples, name: str, **labels: str) -> float:
    """Sum over the samples of `name` whose labels include `labels`."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def chat(http: httpx.Client, tenant: str, question: str, *, headers: dict[str, str] | None = None,
         stream: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "tiny", "max_tokens": 5, "temperature": 0, "ignore_eos": True, "messages": [
        {"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]}
    h = {"x-tenant": tenant, **(headers or {})}
    if not stream:
        r = http.post("/v1/chat/completions", json=body, headers=h)
        assert r.status_code == 200, r.text
        return r.json()["usage"]
    body |= {"stream": True, "stream_options": {"include_usage": True}}
    usage = None
    with http.stream("POST", "/v1/chat/completions", json=body, headers=h) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: {") and '"usage"' in line:
                usage = json.loads(line[6:])["usage"]
    assert usage is not None
    return usage


def test_engine_server_metrics_match_usage(tiny_model_dir: Path) -> None:
    engine = AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=64, served_model_name="tiny"))
    with serve(build_app(LocalBackend(engine), metrics=MetricsAccess(tenant_labels=True))) as url, httpx.Client(base_url=url, timeout=60) as http:
        _, before = scrape(http)
        assert value(before, "fairgate_kv_blocks_total", model="tiny") == 64
        assert value(before, "fairgate_requests_running") == 0

        a1 = chat(http, "a", "What is a quota?")
        _, mid = scrape(http)
        a2 = chat(http, "a", "What is a quota?")
        b1 = chat(http, "b", "Hello", headers={"x-prompt-version": "docs-v7", "x-priority": "interactive"},
                  stream=True)
        r = http.post("/v1/completions", headers={"x-tenant": "a"},
                      json={"model": "tiny", "prompt": [5, 6, 7, 8], "max_tokens": 3, "ignore_eos": True})
        c1 = r.json()["usage"]
        text, m = scrape(http)

    version = system_prompt_hash({"messages": [{"role": "system", "content": SYSTEM}]})
    assert len(version) == 12 and SYSTEM.split()[3] not in text  # a hash, never the prompt's words
    hits, queries = "fairgate_prefix_cache_hits_tokens_total", "fairgate_prefix_cache_queries_tokens_total"
    # The first request found nothing; the identical second one hit the cached system prompt.
    assert a1["prompt_tokens_details"]["cached_tokens"] == 0
    assert a2["prompt_tokens_details"]["cached_tokens"] > 32
    assert value(mid, hits, tenant="a", prompt_version=version) == 0
    assert value(mid, queries, tenant="a", prompt_version=version) == a1["prompt_tokens"]
    assert value(m, hits, tenant="a", model="tiny", prompt_version=version) == a2["prompt_tokens_details"]["cached_tokens"]
    assert value(m, queries, tenant="a", prompt_version=version) == a1["prompt_tokens"] + a2["prompt_tokens"]
    assert value(m, hits, tenant="b", prompt_version="docs-v7") == 0  # tenant b: its own cache
    assert value(m, queries, tenant="b", prompt_version="docs-v7") == b1["prompt_tokens"]
    assert value(m, queries, tenant="a", prompt_version="none") == c1["prompt_tokens"] == 4

    a_all = [a1, a2, c1]
    std = {"tenant": "a", "model": "tiny", "priority": "standard"}
    assert value(m, "fairgate_prompt_tokens_total", **std) == sum(u["prompt_tokens"] for u in a_all)
    assert value(m, "fairgate_generation_tokens_total", **std) == sum(u["completion_tokens"] for u in a_all)
    assert value(m, "fairgate_cached_prompt_tokens_total", **std) == a2["prompt_tokens_details"]["cached_tokens"]
    assert value(m, "fairgate_prompt_tokens_total", tenant="b", priority="interactive") == b1["prompt_tokens"]
    for name in ("fairgate_time_to_first_token_seconds_count", "fairgate_e2e_request_latency_seconds_count",
                 "fairgate_queue_time_seconds_count"):
        assert value(m, name, **std) == 3
        assert value(m, name, tenant="b", priority="interactive") == 1
    # One inter-token gap per generated token after the first.
    assert value(m, "fairgate_inter_token_latency_seconds_count") == sum(
        u["completion_tokens"] - 1 for u in [*a_all, b1])
    assert value(m, "fairgate_requests_total", finish_reason="length") == 4
    assert value(m, "fairgate_time_to_first_token_seconds_sum", **std) > 0
    assert value(m, "fairgate_requests_running") == value(m, "fairgate_requests_waiting") == 0
    assert value(m, "fairgate_kv_blocks_used") == 0 and value(m, "fairgate_kv_blocks_cached") > 0
    assert value(m, "fairgate_preemptions_total", model="tiny") == 0
    assert value(m, "fairgate_engine_steps_total") > 0


def test_metrics_token_when_set(tiny_model_dir: Path, monkeypatch) -> None:
    monkeypatch.setenv("FAIRGATE_METRICS_TOKEN", "scrape-me")
    engine = AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=16, served_model_name="tiny"))
    with serve(build_app(LocalBackend(engine))) as url:
        assert httpx.get(url + "/metrics").status_code == 401
        assert httpx.get(url + "/metrics", headers={"authorization": "Bearer nope"}).status_code == 401
        ok = httpx.get(url + "/metrics", headers={"authorization": "Bearer scrape-me"})
        assert ok.status_code == 200 and "fairgate_kv_blocks_total" in ok.text


def test_n_choices_carry_the_prompt_version_and_count_the_prompt_once(tiny_model_dir: Path) -> None:
    engine = AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=64, served_model_name="tiny"))
    body = {"model": "tiny", "max_tokens": 4, "temperature": 0.8, "seed": 3, "ignore_eos": True, "n": 3,
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hi"}]}
    batch = {"model": "tiny", "max_tokens": 2, "ignore_eos": True, "n": 2, "prompt": [[5, 6, 7], [8, 9, 10, 11]]}
    with serve(build_app(LocalBackend(engine), metrics=MetricsAccess(tenant_labels=True))) as url, httpx.Client(base_url=url, timeout=60) as http:
        r = http.post("/v1/chat/completions", json=body, headers={"x-tenant": "n", "x-prompt-version": "v2"})
        assert r.status_code == 200 and len(r.json()["choices"]) == 3
        usage = r.json()["usage"]
        b = http.post("/v1/completions", json=batch, headers={"x-tenant": "p"})
        assert b.status_code == 200 and len(b.json()["choices"]) == 4
        _, m = scrape(http)
    queries = "fairgate_prefix_cache_queries_tokens_total"
    # Every choice is labelled by the request's version ("none" would mean a lost label) and
    # the prompt counts once, as in the usage the client got.
    assert value(m, queries, tenant="n", prompt_version="v2") == usage["prompt_tokens"]
    assert value(m, queries, tenant="n", prompt_version="none") == 0
    assert value(m, "fairgate_prompt_tokens_total", tenant="n") == usage["prompt_tokens"]
    assert value(m, "fairgate_generation_tokens_total", tenant="n") == usage["completion_tokens"] == 12
    assert value(m, queries, tenant="p", prompt_version="none") == b.json()["usage"]["prompt_tokens"] == 7
    assert value(m, "fairgate_generation_tokens_total", tenant="p") == 8
