"""A pool of two real engine servers behind a real gateway: requests sharing a tenant's system
prompt land on one replica (its cache hits), every replica gets the fairness weights, a dead
replica is ejected and its requests fail over, a restarted one is re-admitted, a drained one
finishes its in-flight stream and is removed. Per-replica metrics on the gateway's /metrics."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fairgate.gateway.settings import Settings
from tests.gateway.harness import ADMIN_TOKEN, Admin, GatewayThread, free_port
from tests.helpers.engine_proc import EngineProcess

KEY, SECRET = "pool-engine-key", "pool-control"
SYSTEM = "You are the support assistant of ACME. Answer briefly, politely, and in English. " * 3


@pytest.fixture(scope="module")
def fleet(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    ports = [free_port(), free_port()]
    engines = [EngineProcess(tiny_model_dir, "--api-key", KEY, "--control-secret", SECRET, port=p).start()
               for p in ports]
    db = tmp_path_factory.mktemp("pool") / "gw.db"
    settings = Settings(admin_token=ADMIN_TOKEN, database_url=f"sqlite:///{db}", embedded_engine=False,
                        control_secret=SECRET, fairness_sync_interval_s=0.5)
    try:
        with GatewayThread(settings) as gw:
            admin = Admin(gw.url)
            r = admin.client.post("/admin/pools", json={
                "name": "tiny-pool", "kind": "local", "model": "tiny", "api_key": KEY,
                "tokenizer": str(tiny_model_dir),
                "replicas": [{"name": f"r{i}", "base_url": e.url + "/v1"} for i, e in enumerate(engines)]})
            assert r.status_code == 201, r.text
            pool = gw.state.backends["tiny-pool"]
            pool.options.probe_interval_s = 0.2
            yield gw, admin, engines, tiny_model_dir
            admin.close()
    finally:
        for e in engines:
            e.stop()


def chat(gw: GatewayThread, key: str, user: str, **extra) -> httpx.Response:
    body = {"model": "tiny-pool", "max_tokens": 2, "temperature": 0,
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}], **extra}
    return httpx.post(gw.url + "/v1/chat/completions", json=body, headers={"authorization": f"Bearer {key}"},
                      timeout=60)


def live(admin: Admin) -> dict[str, dict]:
    r = admin.client.get("/admin/pools/tiny-pool")
    assert r.status_code == 200, r.text
    return {rep["name"]: rep["live"] for rep in r.json()["replicas"]}


def wait_for(cond, timeout: float = 20.0) -> None:
    deadline = time.time() + timeout
    while not cond():
        assert time.time() < deadline, "condition not reached"
        time.sleep(0.1)


def test_shared_system_prompt_lands_on_one_replica_and_hits_its_cache(fleet) -> None:
    gw, admin, _engines, _ = fleet
    key = admin.key(admin.tenant("acme")["id"])["key"]
    before = {n: s["requests"] for n, s in live(admin).items()}
    cached = []
    for i in range(6):
        r = chat(gw, key, f"question {i}")
        assert r.status_code == 200, r.text
        cached.append(r.json()["usage"]["prompt_tokens_details"]["cached_tokens"])
    after = {n: s["requests"] for n, s in live(admin).items()}
    sent = {n: after[n] - before[n] for n in after}
    assert sorted(sent.values()) == [0, 6]  # all six on the tenant's home replica
    assert cached[0] == 0 and all(c >= 32 for c in cached[1:])  # the shared prompt's blocks hit
    metrics = httpx.get(gw.url + "/metrics", headers={"authorization": f"Bearer {ADMIN_TOKEN}"}).text
    home = max(sent, key=sent.get)
    assert f'fairgate_pool_routed_total{{pool="tiny-pool",reason="affinity",replica="{home}"}}' in metrics


def test_every_replica_gets_the_fairness_weights(fleet) -> None:
    gw, admin, engines, _ = fleet
    t = admin.tenant("weighted", weight=3.0)

    def pushed() -> bool:
        got = [httpx.get(e.url + "/control/fairness", headers={"x-control-secret": SECRET}).json()["weights"]
               for e in engines]
        return all(w.get(t["id"]) == 3.0 for w in got)

    wait_for(pushed)


def test_dead_replica_is_ejected_requests_fail_over_and_it_comes_back(fleet) -> None:
    gw, admin, engines, model_dir = fleet
    key = admin.key(admin.tenant("failover")["id"])["key"]
    assert chat(gw, key, "warm").status_code == 200
    home = max(live(admin).items(), key=lambda kv: kv[1]["requests"])[0]
    idx = int(home[1:])
    port = int(engines[idx].url.rsplit(":", 1)[1])
    engines[idx].stop()
    for i in range(4):  # the first one fails over inside the pool; the rest go elsewhere
        r = chat(gw, key, f"after {i}")
        assert r.status_code == 200, r.text
    wait_for(lambda: live(admin)[home]["healthy"] is False)
    assert live(admin)[home]["ejections"] >= 1
    engines[idx] = EngineProcess(model_dir, "--api-key", KEY, "--control-secret", SECRET, port=port).start()
    wait_for(lambda: live(admin)[home]["healthy"] is True)


def test_drain_lets_the_in_flight_stream_finish_then_removes(fleet) -> None:
    gw, admin, engines, _ = fleet
    key = admin.key(admin.tenant("drainer")["id"])["key"]
    body = {"model": "tiny-pool", "max_tokens": 120, "stream": True, "temperature": 0,
            "messages": [{"role": "user", "content": "tell me a long story"}], "ignore_eos": True}
    result: dict = {}
    with httpx.Client(timeout=60) as c, c.stream("POST", gw.url + "/v1/chat/completions", json=body,
                                                 headers={"authorization": f"Bearer {key}"}) as stream:
        lines = stream.iter_lines()
        assert next(lines).startswith("data: ")
        busy = [n for n, s in live(admin).items() if s["outstanding"] == 1]
        assert len(busy) == 1
        drain = threading.Thread(target=lambda: result.update(admin.client.post(
            f"/admin/pools/tiny-pool/replicas/{busy[0]}/drain", params={"wait_s": 60}).json()))
        drain.start()
        rest = [line for line in lines if line]
        drain.join(60)
    assert rest[-1] == "data: [DONE]" and not any('"error"' in line for line in rest)  # never cut
    assert result == {"object": "pool.replica", "pool": "tiny-pool", "name": busy[0], "draining": True,
                      "idle": True, "removed": True}
    assert busy[0] not in live(admin)
    assert chat(gw, key, "still served").status_code == 200  # by the replica that stays
