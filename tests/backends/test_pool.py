"""PoolBackend's own state machine: ejection after failed probes, re-admission after good ones,
drain waits for outstanding requests, replica state kept across configuration updates."""

from __future__ import annotations

import asyncio

import httpx

from fairgate.backends.http1 import HTTP1Pool
from fairgate.backends.openai_compat import OpenAICompatBackend
from fairgate.backends.pool import PoolBackend, PoolOptions, ReplicaSpec
from fairgate.backends.pool_load import LoadReading, parse_vllm_metrics


def make_pool(specs: list[ReplicaSpec]) -> PoolBackend:
    http1 = HTTP1Pool()
    return PoolBackend("p", "local", specs, lambda s: OpenAICompatBackend(s.name, s.base_url, http1),
                       httpx.AsyncClient(), options=PoolOptions(eject_after=2, readmit_after=2))


def test_eject_after_failed_probes_readmit_after_good_ones() -> None:
    pool = make_pool([ReplicaSpec("a", "http://127.0.0.1:9/v1")])
    r, opts = pool.replicas["a"], pool.options
    r.probed(None, opts)
    assert r.healthy  # one failed probe is a blip
    r.probed(None, opts)
    assert (r.healthy, r.ejections) == (False, 1)
    r.probed(LoadReading(0.5, 0), opts)
    assert not r.healthy
    r.probed(LoadReading(0.25, 0), opts)
    assert (r.healthy, r.kv_usage) == (True, 0.25)


def test_update_keeps_live_state_and_drain_excludes() -> None:
    pool = make_pool([ReplicaSpec("a", "http://127.0.0.1:9/v1"), ReplicaSpec("b", "http://127.0.0.1:10/v1")])
    a = pool.replicas["a"]
    a.outstanding = 1  # a request in flight on `a`
    pool.update([ReplicaSpec("a", "http://127.0.0.1:9/v1", draining=True), ReplicaSpec("b", "http://127.0.0.1:10/v1")])
    assert pool.replicas["a"] is a and a.spec.draining and not a.routable
    assert asyncio.run(pool.wait_idle("a", 0.1)) is False
    a.outstanding = 0
    assert asyncio.run(pool.wait_idle("a", 0.1)) is True
    pool.update([ReplicaSpec("a", "http://127.0.0.1:11/v1")])  # moved: a new replica object
    assert pool.replicas["a"] is not a and list(pool.replicas) == ["a"]


def test_vllm_metrics_parse() -> None:
    text = ('# HELP vllm:kv_cache_usage_perc KV-cache usage.\n# TYPE vllm:kv_cache_usage_perc gauge\n'
            'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.375\n'
            'vllm:num_requests_waiting{engine="0",model_name="m"} 3.0\nvllm:num_requests_running 2\n')
    assert parse_vllm_metrics(text) == LoadReading(0.375, 3)
    assert parse_vllm_metrics("vllm:gpu_cache_usage_perc 0.5\n") == LoadReading(0.5, None)


async def test_one_tenants_back_off_on_a_replica_neither_ejects_it_nor_blocks_others() -> None:
    """r0 fails tenant a's requests only: a fails over to r1 and, once a's circuit on r0 opens,
    skips r0 at once; r0 stays healthy and keeps serving b."""
    from fairgate.backends.base import GenerationRequest
    from fairgate.backends.breaker import Breaker, BreakerPolicy
    from tests.helpers.upstream import UpstreamServer

    with UpstreamServer() as r0, UpstreamServer() as r1:
        r0.behaviour.fail_if = lambda body, headers: 500 if headers.get("x-tenant") == "a" else None
        http1 = HTTP1Pool()
        async with httpx.AsyncClient() as http:
            pool = PoolBackend("p", "local", [ReplicaSpec("r0", r0.base_url), ReplicaSpec("r1", r1.base_url)],
                               lambda s: OpenAICompatBackend(f"p/{s.name}", s.base_url, http1, is_local=True,
                                                             max_retries=0, breaker=Breaker(BreakerPolicy(open_s=60))),
                               http, options=PoolOptions(policy="least_loaded"))  # r0 first while idle

            def req(tenant: str) -> GenerationRequest:
                return GenerationRequest.from_body("r", "chat", {"model": "m", "max_tokens": 1, "messages": [
                    {"role": "user", "content": "x"}]}, tenant=tenant)

            for _ in range(8):
                assert (await pool.complete(req("a")))["usage"]["completion_tokens"] == 1
            for _ in range(3):
                await pool.complete(req("b"))
            heard = [h.get("x-tenant") for h in r0.app.headers]
            assert heard == ["a"] * 5 + ["b"] * 3  # a's circuit on r0 opened at its fifth failure
            r = pool.replicas["r0"]
            assert (r.healthy, r.ejections, r.backend.breaker.tenant_state("a").name) == (True, 0, "OPEN")
            assert [h.get("x-tenant") for h in r1.app.headers] == ["a"] * 8
        await http1.aclose()
