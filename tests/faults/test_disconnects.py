"""Clients that leave: a non-streaming request is cancelled end to end (gateway → engine
server or in-process engine), its KV blocks come back, its reservation is settled and one usage
row bills what was generated; a cut stream bills the exact prompt tokens and what was sent.

Every scenario reports the engine's KV blocks in use before and after (they must match)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from fairgate.gateway.settings import Settings
from fairgate.gateway.store.tables import UsageRecord
from tests.faults.engines import (
    LONG,
    engine_stats,
    post_then_leave,
    sse_chunks,
    wait_drained,
    wait_until,
)
from tests.faults.figures import Figures
from tests.gateway.harness import ADMIN_TOKEN, REDIS_URL, Admin, GatewayThread, redis_prefix
from tests.helpers.engine_proc import EngineProcess

ENGINE_KEY = "faults-engine-key"
ENGINE_ARGS = ("--api-key", ENGINE_KEY, "--max-model-len", "4096", "--num-kv-blocks", "512",
               "--max-num-batched-tokens", "256")
# Turkish: the UTF-8 byte bound over-counts it most (the estimate a cut stream used to bill)
TURKISH = ("Merhaba! Bugün İstanbul'da hava çok güzel; öğleden sonra Boğaz kıyısında yürüyüş yapıp "
           "çay içmeyi düşünüyoruz. Sen de gelmek ister misin?")


@pytest.fixture(scope="module")
def engine(long_model_dir: Path) -> Iterator[EngineProcess]:
    with EngineProcess(long_model_dir, *ENGINE_ARGS) as proc:
        yield proc


@pytest.fixture
def gateway(tmp_path, engine) -> Iterator[tuple[GatewayThread, str, str]]:
    """A gateway over Redis and SQLite with the engine server as backend `eng`; (gw, tenant, key)."""
    with contextlib.ExitStack() as es:
        prefix = es.enter_context(redis_prefix())
        gw = es.enter_context(GatewayThread(Settings(
            admin_token=ADMIN_TOKEN, database_url=f"sqlite:///{tmp_path}/gw.db", embedded_engine=False,
            redis_url=REDIS_URL, redis_prefix=prefix, usage_flush_interval_s=0.02)))
        admin = Admin(gw.url)
        es.callback(admin.close)
        admin.backend("eng", engine.url + "/v1", model="tiny", kind="local", api_key=ENGINE_KEY)
        tenant = admin.tenant()["id"]
        admin.quota(tenant, max_concurrent=2)
        yield gw, tenant, admin.key(tenant)["key"]


def rows(gw: GatewayThread, tenant: str) -> list[UsageRecord]:
    with gw.state.sessions() as s:
        return list(s.scalars(select(UsageRecord).where(UsageRecord.tenant_id == tenant)))


def chat(stream: bool = False, max_tokens: int = LONG, content: str = "hello there") -> dict[str, Any]:
    return {"model": "eng", "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
            "temperature": 0, "ignore_eos": True, "stream": stream}


def prompt_tokens_of(gw: GatewayThread, key: str, body: dict[str, Any]) -> int:
    """The engine's own prompt count for `body` (one token generated, not cut)."""
    r = httpx.post(gw.url + "/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                   json={**body, "max_tokens": 1, "stream": False}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["usage"]["prompt_tokens"]


def settled(gw: GatewayThread, tenant: str) -> dict[str, int]:
    """The tenant's quota counters once nothing is held any more."""
    wait_until(lambda: gw.call(gw.state.quota.counters(f"t:{tenant}"))["concurrent"] == 0, 10)
    return gw.call(gw.state.quota.counters(f"t:{tenant}"))


def generating(url: str, from_tokens: int, at_least: int = 40):
    """A leave condition: the engine has generated `at_least` tokens since `from_tokens`."""
    return lambda _: engine_stats(url)["generation_tokens"] >= from_tokens + at_least


def test_engine_server_alone_aborts_a_non_stream_request_whose_client_left(engine, fault_report):
    before = wait_drained(engine.url)
    post_then_leave(engine.url, "/v1/completions", {"prompt": "hello there", "max_tokens": LONG,
                                                    "ignore_eos": True, "temperature": 0},
                    generating(engine.url, before["generation_tokens"]),
                    headers={"authorization": f"Bearer {ENGINE_KEY}"})
    after = wait_drained(engine.url)
    generated = after["generation_tokens"] - before["generation_tokens"]
    fault_report(Figures("engine server: client left (non-stream)", kv_before=before["kv_blocks_used"],
                         kv_after=after["kv_blocks_used"], statuses={"generated": generated}))
    assert after["requests_aborted"] == before["requests_aborted"] + 1
    assert after["kv_blocks_used"] == before["kv_blocks_used"] == 0
    assert 40 <= generated < LONG  # stopped long before max_tokens


def test_engine_server_keeps_what_a_named_stream_used_after_its_client_left(engine):
    """A gateway replica killed mid-stream: its successor asks the engine what the stream used."""
    before = wait_drained(engine.url)
    h = {"authorization": f"Bearer {ENGINE_KEY}", "x-request-id": "cut-stream-1"}
    post_then_leave(engine.url, "/v1/completions", {"prompt": "hello there", "max_tokens": LONG, "stream": True,
                                                    "ignore_eos": True, "temperature": 0},
                    generating(engine.url, before["generation_tokens"]), headers=h)
    after = wait_drained(engine.url)
    generated = after["generation_tokens"] - before["generation_tokens"]
    got = httpx.get(engine.url + "/v1/requests/cut-stream-1/usage", headers=h, timeout=10).json()
    assert got["status"] == "cancelled" and got["usage"]["prompt_tokens"] > 0
    assert generated - 1 <= got["usage"]["completion_tokens"] <= generated and generated < LONG
    # only the engine's key reads it
    assert httpx.get(engine.url + "/v1/requests/cut-stream-1/usage", timeout=10).status_code in (401, 403)


def test_gateway_cancels_a_non_stream_request_whose_client_left(gateway, engine, fault_report):
    gw, tenant, key = gateway
    h = {"authorization": f"Bearer {key}"}
    prompt = prompt_tokens_of(gw, key, chat())
    before = wait_drained(engine.url)
    post_then_leave(gw.url, "/v1/chat/completions", chat(), generating(engine.url, before["generation_tokens"]), h)
    wait_until(lambda: len(rows(gw, tenant)) == 2)
    after = wait_drained(engine.url)
    generated = after["generation_tokens"] - before["generation_tokens"]
    cut = next(r for r in rows(gw, tenant) if r.status != "finished")
    counters = settled(gw, tenant)
    fault_report(Figures("gateway → engine server: client left (non-stream)", rows_written=len(rows(gw, tenant)),
                         kv_before=before["kv_blocks_used"], kv_after=after["kv_blocks_used"],
                         leaked=counters["concurrent"], statuses={"generated": generated,
                                                                  "billed": cut.completion_tokens}))
    assert after["requests_aborted"] == before["requests_aborted"] + 1 and 40 <= generated < LONG
    assert after["kv_blocks_used"] == before["kv_blocks_used"] == 0
    assert (cut.status, cut.http_status, cut.stream, cut.usage_estimated) == ("disconnected", 499, False, False)
    assert cut.backend == "eng" and cut.prompt_tokens == prompt
    # what the engine delivered before the cut, from its ledger; the step running at the cut may
    # add a token that nobody received
    assert generated - 1 <= cut.completion_tokens <= generated
    # the reservation (prompt bound + 3,000) was replaced by what was used, in every counter
    assert counters["daily_tokens"] == sum(r.prompt_tokens + r.completion_tokens for r in rows(gw, tenant))
    assert len(rows(gw, tenant)) == 2  # one row each, nothing twice


def test_cut_stream_bills_the_exact_prompt_and_what_was_sent(gateway, engine, fault_report):
    gw, tenant, key = gateway
    body = chat(stream=True, content=TURKISH)
    prompt = prompt_tokens_of(gw, key, body)
    before = wait_drained(engine.url)
    got = post_then_leave(gw.url, "/v1/chat/completions", body, lambda raw: len(sse_chunks(raw)) >= 6,
                          {"authorization": f"Bearer {key}"})
    wait_until(lambda: len(rows(gw, tenant)) == 2)
    after = wait_drained(engine.url)
    cut = next(r for r in rows(gw, tenant) if r.status != "finished")
    seen = [c for c in sse_chunks(got) if c["choices"] and c["choices"][0]["delta"].get("content")]
    fault_report(Figures("gateway → engine server: stream cut by the client", rows_written=2,
                         kv_before=before["kv_blocks_used"], kv_after=after["kv_blocks_used"],
                         leaked=settled(gw, tenant)["concurrent"],
                         statuses={"prompt": cut.prompt_tokens, "byte_bound": len(TURKISH.encode())}))
    assert all("usage" not in c for c in sse_chunks(got))  # the engine's running usage stays with us
    assert (cut.status, cut.usage_estimated, cut.prompt_tokens) == ("disconnected", False, prompt)
    assert prompt < len(TURKISH.encode())  # the byte bound would have billed more
    generated = after["generation_tokens"] - before["generation_tokens"]
    assert len(seen) <= cut.completion_tokens <= generated < LONG
    assert after["kv_blocks_used"] == 0


@pytest.fixture
def embedded(tmp_path, long_model_dir) -> Iterator[tuple[GatewayThread, str, str]]:
    """A gateway with the in-process engine (its default name: the model folder's)."""
    with contextlib.ExitStack() as es:
        prefix = es.enter_context(redis_prefix())
        gw = es.enter_context(GatewayThread(Settings(
            admin_token=ADMIN_TOKEN, database_url=f"sqlite:///{tmp_path}/gw.db", model=str(long_model_dir),
            redis_url=REDIS_URL, redis_prefix=prefix, usage_flush_interval_s=0.02)))
        admin = Admin(gw.url)
        es.callback(admin.close)
        tenant = admin.tenant()["id"]
        yield gw, tenant, admin.key(tenant)["key"]


def test_embedded_engine_cancelled_when_the_client_leaves(embedded, long_model_dir, fault_report):
    gw, tenant, key = embedded
    engine = gw.state.embedded.engine
    body = {**chat(content=TURKISH), "model": long_model_dir.name}
    before = engine.stats()
    post_then_leave(gw.url, "/v1/chat/completions", body,
                    lambda _: engine.stats().generation_tokens >= before.generation_tokens + 40,
                    {"authorization": f"Bearer {key}"})
    wait_until(lambda: len(rows(gw, tenant)) == 1)
    wait_until(lambda: engine.stats().running == 0 and engine.stats().kv_blocks_used == 0)
    after = engine.stats()
    (cut,) = rows(gw, tenant)
    generated = after.generation_tokens - before.generation_tokens
    counters = settled(gw, tenant)
    fault_report(Figures("embedded engine: client left (non-stream)", rows_written=1,
                         kv_before=before.kv_blocks_used, kv_after=after.kv_blocks_used,
                         leaked=counters["concurrent"]))
    assert (cut.status, cut.usage_estimated) == ("disconnected", False)
    assert cut.prompt_tokens < len(TURKISH.encode()) and generated - 1 <= cut.completion_tokens <= generated
    assert counters["daily_tokens"] == cut.prompt_tokens + cut.completion_tokens
    assert after.requests_aborted == before.requests_aborted + 1


def test_embedded_cut_stream_bills_exact_prompt(embedded, long_model_dir):
    gw, tenant, key = embedded
    body = {**chat(stream=True, content=TURKISH), "model": long_model_dir.name}
    post_then_leave(gw.url, "/v1/chat/completions", body, lambda raw: len(sse_chunks(raw)) >= 6,
                    {"authorization": f"Bearer {key}"})
    whole = httpx.post(gw.url + "/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                       json={**body, "stream": False, "max_tokens": 1}, timeout=60).json()
    wait_until(lambda: len(rows(gw, tenant)) == 2)
    cut = next(r for r in rows(gw, tenant) if r.status != "finished")
    assert (cut.status, cut.usage_estimated) == ("disconnected", False)
    assert cut.prompt_tokens == whole["usage"]["prompt_tokens"] and 5 <= cut.completion_tokens < LONG
