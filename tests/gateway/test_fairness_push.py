"""Weights flow from the admin API through the gateway into an engine server's fair queue.

Real parts on loopback: the gateway (uvicorn thread), an engine server (uvicorn thread) on a
tiny model with one sequence slot, so the order requests finish in is the queue's order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fairgate.backends.local.engine.async_engine import AsyncEngine, EngineConfig
from fairgate.backends.local.serving.backend import LocalBackend
from fairgate.backends.local.serving.server import build_app
from fairgate.gateway.quota import ScopeLimits
from fairgate.scheduler.fair_queue import FairQueue
from tests.helpers.app_thread import serve_app
from tests.helpers.fair_order import completion_order

SECRET = "fair-secret"


class EngineServerThread:
    """The engine server app on `engine`, served on loopback while entered (`url`)."""

    def __init__(self, engine: AsyncEngine, secret: str | None = SECRET) -> None:
        self.engine = engine
        self.app = build_app(LocalBackend(engine, name="tiny", model_name="tiny"), control_secret=secret)
        self._serving = contextlib.ExitStack()
        self.url = ""

    def __enter__(self) -> EngineServerThread:
        self.url, _ = self._serving.enter_context(serve_app(self.app))
        return self

    def __exit__(self, *exc: object) -> None:
        self._serving.close()

    def held(self) -> dict:
        r = httpx.get(self.url + "/control/fairness", headers={"x-control-secret": SECRET})
        assert r.status_code == 200
        return r.json()


@pytest.fixture
def engine_server(tiny_model_dir: Path) -> Iterator[EngineServerThread]:
    engine = AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=64, max_num_seqs=1))
    with EngineServerThread(engine) as srv:
        yield srv


async def test_admin_weight_change_steers_the_engine_servers_next_admissions(
    make_gateway, engine_server: EngineServerThread
) -> None:
    gw, admin = make_gateway(control_secret=SECRET, fairness_sync_interval_s=3600)
    a, b = admin.tenant("alpha")["id"], admin.tenant("beta")["id"]
    admin.backend("tiny", engine_server.url + "/v1", kind="local", model="tiny")
    # registering the engine server pushed the weights at once
    held = engine_server.held()
    assert held["weights"] == {a: 1.0, b: 1.0} and held["version"] > 0
    engine = engine_server.engine
    queue = engine.scheduler.queue
    assert isinstance(queue, FairQueue)

    order = await completion_order(engine, [("a1", a), ("a2", a), ("b1", b), ("b2", b)], 20)
    assert order == ["a1", "b1", "a2", "b2"]

    r = admin.client.patch(f"/admin/tenants/{b}", json={"weight": 4})
    assert r.status_code == 200, r.text
    assert engine_server.held()["weights"] == {a: 1.0, b: 4.0}  # pushed before the reply
    order = await completion_order(engine, [("a3", a), ("a4", a), ("b3", b), ("b4", b)], 80)
    assert order == ["a3", "b3", "b4", "a4"]
    assert queue.weight_of(b) == 4.0 and queue.weight_of("unknown-tenant") == 1.0

    # a request through the gateway reaches the engine under its tenant's id
    key = admin.key(a)["key"]
    before = queue.counter(a)
    r = httpx.post(gw.url + "/v1/completions", headers={"authorization": f"Bearer {key}"},
                   json={"model": "tiny", "prompt": "hello there", "max_tokens": 3}, timeout=60)
    assert r.status_code == 200, r.text
    assert queue.counter(a) > before


def test_sync_repushes_to_an_engine_that_lost_its_weights(
    make_gateway, engine_server: EngineServerThread
) -> None:
    gw, admin = make_gateway(control_secret=SECRET, fairness_sync_interval_s=0.1)
    t = admin.tenant("gamma", weight=2.5)["id"]
    admin.backend("tiny", engine_server.url + "/v1", kind="local", model="tiny")
    assert engine_server.held()["weights"] == {t: 2.5}
    # as after a restart, with a clock far ahead: empty weights at a version above ours
    future = engine_server.held()["version"] + 10**12
    r = httpx.put(engine_server.url + "/control/fairness", headers={"x-control-secret": SECRET},
                  json={"weights": {}, "version": future})
    assert r.status_code == 200 and r.json()["weights"] == {}  # (the sync may undo it any moment)
    deadline = time.time() + 20
    while engine_server.held()["weights"] != {t: 2.5}:
        assert time.time() < deadline, "the sync task never re-pushed"
        time.sleep(0.05)
    assert engine_server.held()["version"] > future


def test_tenant_near_its_budget_is_pushed_a_lower_weight(
    make_gateway, engine_server: EngineServerThread
) -> None:
    gw, admin = make_gateway(control_secret=SECRET, fairness_sync_interval_s=0.1)
    t = admin.tenant("delta", weight=2.0)["id"]
    admin.quota(t, daily_tokens=1000)
    admin.backend("tiny", engine_server.url + "/v1", kind="local", model="tiny")
    assert engine_server.held()["weights"] == {t: 2.0}
    store = gw.state.quota  # the in-process store: plain Python, safe to drive from here

    async def spend(tokens: int) -> None:
        scope = ScopeLimits(f"t:{t}", daily_tokens=1000)
        await store.reserve("r", [scope], tokens, 0.0, await store.config_bus().version())
        await store.settle("r", tokens, 0.0)

    asyncio.run(spend(950))
    deadline = time.time() + 20
    while engine_server.held()["weights"] != {t: 1.0}:
        assert time.time() < deadline, "the near-budget weight was never pushed"
        time.sleep(0.05)


def test_control_needs_the_secret(engine_server: EngineServerThread) -> None:
    url = engine_server.url + "/control/fairness"
    assert httpx.put(url, json={"weights": {"x": 2}}).status_code == 401
    assert httpx.put(url, json={"weights": {"x": 2}},
                     headers={"x-control-secret": "wrong"}).status_code == 401
    assert engine_server.held()["weights"] == {}


def test_control_is_closed_without_a_configured_secret(tiny_model_dir: Path, monkeypatch) -> None:
    monkeypatch.delenv("FAIRGATE_CONTROL_SECRET", raising=False)
    engine = AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=16))
    srv = EngineServerThread(engine, secret=None)
    with srv:
        r = httpx.put(srv.url + "/control/fairness", json={"weights": {"x": 2}})
        assert r.status_code == 403 and r.json()["error"]["code"] == "control_disabled"
    assert engine.fairness_weights == {}


def test_a_push_refused_for_the_secret_says_which_setting_to_fix(make_gateway, engine_server, caplog) -> None:
    caplog.set_level(logging.WARNING, "fairgate")
    gw, admin = make_gateway(control_secret="not-the-engines", fairness_sync_interval_s=3600)
    admin.tenant("alpha")
    admin.backend("tiny", engine_server.url + "/v1", kind="local", model="tiny")
    lines = [r.getMessage() for r in caplog.records if "fairness push" in r.getMessage()]
    assert lines and all("FAIRGATE_CONTROL_SECRET" in x and "--control-secret" in x for x in lines), lines
    assert engine_server.held()["weights"] == {}  # nothing was taken
