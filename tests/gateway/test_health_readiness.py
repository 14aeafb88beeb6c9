"""/health/liveness, /health/readiness (database, Redis, a backend for every model), /version,
and a graceful shutdown that lets an open stream finish."""

from __future__ import annotations

import signal
import time

import httpx

from fairgate.gateway.store.db import upgrade
from tests.gateway.harness import ADMIN_TOKEN, Admin, GatewayProcess
from tests.helpers.upstream import UpstreamServer


def test_liveness_version_and_readiness(make_gateway):
    gw, _admin = make_gateway()
    assert httpx.get(gw.url + "/health/liveness").json() == {"status": "ok"}
    v = httpx.get(gw.url + "/version").json()
    assert v["name"] == "fairgate" and v["version"].startswith("0.1.0")
    r = httpx.get(gw.url + "/health/readiness")
    assert r.status_code == 200
    assert r.json() == {"status": "ready", "checks": {"database": True, "redis": None, "models": {"up": True},
                                                      "shutting_down": False}}


def test_readiness_checks_redis_and_fails_for_a_pool_without_live_replicas(make_gateway):
    gw, admin = make_gateway(redis=True)
    assert httpx.get(gw.url + "/health/readiness").json()["checks"]["redis"] is True
    r = admin.client.post("/admin/pools", json={"name": "dead", "replicas": [
        {"name": "r0", "base_url": "http://127.0.0.1:9/v1"}]})  # discard port: nothing listens
    assert r.status_code == 201, r.text
    deadline = time.time() + 20
    while (r := httpx.get(gw.url + "/health/readiness")).status_code == 200:
        assert time.time() < deadline, r.text
        time.sleep(0.2)
    assert r.status_code == 503
    assert r.json()["status"] == "not_ready" and r.json()["checks"]["models"] == {"up": True, "dead": False}


def test_sigterm_lets_the_open_stream_finish(tmp_path):
    with UpstreamServer() as up:
        up.behaviour.token_delay_s = 0.1  # 20 chunks: two seconds of streaming
        url = f"sqlite:///{tmp_path}/g.db"
        upgrade(url)
        env = {"FAIRGATE_DATABASE_URL": url, "FAIRGATE_ADMIN_TOKEN": ADMIN_TOKEN,
               "FAIRGATE_EMBEDDED_ENGINE": "false", "FAIRGATE_SHUTDOWN_GRACE_S": "20"}
        with GatewayProcess(env) as gw:
            admin = Admin(gw.url)
            admin.backend("up", up.base_url, model="up-model")
            key = admin.key(admin.tenant()["id"])["key"]
            admin.close()
            body = {"model": "up", "stream": True, "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}
            with httpx.stream("POST", gw.url + "/v1/chat/completions", json=body, timeout=30,
                              headers={"authorization": f"Bearer {key}"}) as s:
                lines = s.iter_lines()
                assert next(lines).startswith("data: ")
                gw.proc.send_signal(signal.SIGTERM)
                rest = [line for line in lines if line]
            assert rest[-1] == "data: [DONE]"
            assert sum('"content"' in line for line in rest) == 19  # every remaining word arrived
            # uvicorn re-raises the signal once it shut down cleanly: the conventional exit
            assert gw.proc.wait(timeout=30) in (0, -signal.SIGTERM)
