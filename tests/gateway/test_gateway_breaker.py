"""The circuit breaker through a real gateway, in front of a real upstream of ours on loopback
(behind a TCP proxy we can cut): one tenant's failing requests back off that tenant only, an
outage opens it for everybody until a probe finds the upstream back, an upstream's Retry-After
is honoured, and /metrics and /admin/backends show the state."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from fairgate.backends.breaker import BreakerPolicy
from tests.gateway.harness import ADMIN_TOKEN, Admin, GatewayThread
from tests.helpers.tcp_proxy import TcpProxy
from tests.helpers.upstream import UpstreamServer


@pytest.fixture
def flaky():
    with UpstreamServer() as up, TcpProxy("127.0.0.1", up.port) as proxy:
        yield up, proxy


def keys(gw: GatewayThread, admin: Admin, n: int, open_s: float) -> list[tuple[str, str]]:
    """`n` tenants' keys. The breaker opens for `open_s` (longer than the test's steps take on a
    loaded machine), and stays the same object across the rebuilds these admin calls cause."""
    breaker = gw.state.backends["flaky"].breaker
    breaker.policy = BreakerPolicy(open_s=open_s)
    out = []
    for _ in range(n):
        t = admin.tenant()
        out.append((t["id"], admin.key(t["id"])["key"]))
    assert gw.state.backends["flaky"].breaker is breaker
    return out


def ask(url: str, key: str) -> httpx.Response:
    return httpx.post(url + "/v1/chat/completions", headers={"authorization": f"Bearer {key}"}, timeout=30,
                      json={"model": "flaky", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]})


def code(r: httpx.Response) -> tuple[int, str | None]:
    return r.status_code, r.json()["error"]["code"] if r.status_code != 200 else None


def metrics(url: str) -> dict[str, float]:
    text = httpx.get(url + "/metrics", headers={"authorization": f"Bearer {ADMIN_TOKEN}"}).text
    return {line.split("{")[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line.startswith("fairgate_backend_breaker") and 'backend="flaky"' in line}


def breaker_view(admin: Admin) -> dict[str, Any]:
    rows = admin.client.get("/admin/backends").json()["data"]
    return next(r for r in rows if r["name"] == "flaky")["live"]["breaker"]


def test_one_tenants_failing_requests_back_off_that_tenant_only(make_gateway, flaky):
    up, proxy = flaky
    gw, admin = make_gateway()
    admin.backend("flaky", f"http://127.0.0.1:{proxy.port}/v1", model="m", kind="local")  # hears X-Tenant
    (a, key_a), (_, key_b) = keys(gw, admin, 2, open_s=60)
    up.behaviour.fail_if = lambda body, headers: 500 if headers.get("x-tenant") == a else None
    got_a = [code(ask(gw.url, key_a)) for _ in range(4)]
    # three tries a request: the fifth failure opens a's circuit, so the second request stops
    # retrying there, and a's later requests are refused here
    assert got_a == [(500, "upstream_error")] * 2 + [(503, "upstream_backoff")] * 2
    assert sum(h.get("x-tenant") == a for h in up.app.headers) == 5
    assert [code(ask(gw.url, key_b)) for _ in range(12)] == [(200, None)] * 12
    r = ask(gw.url, key_a)
    assert r.status_code == 503 and int(r.headers["retry-after"]) >= 1
    assert metrics(gw.url) == {"fairgate_backend_breaker_state": 0.0, "fairgate_backend_breaker_opened_total": 0.0,
                               "fairgate_backend_breaker_tenants_open": 1.0,
                               "fairgate_backend_breaker_tenant_opened_total": 1.0}
    view = breaker_view(admin)
    assert view["state"] == "closed" and list(view["tenants"]) == [a]
    assert view["tenants_open"] == 1
    assert view["tenants"][a]["state"] in ("open", "half_open")


def test_an_outage_opens_it_for_everybody_and_a_probe_closes_it(make_gateway, flaky):
    up, proxy = flaky
    gw, admin = make_gateway()
    admin.backend("flaky", f"http://127.0.0.1:{proxy.port}/v1", model="m")
    (_, key_a), (_, key_b), (_, key_c) = keys(gw, admin, 3, open_s=5)
    assert code(ask(gw.url, key_c)) == (200, None)
    proxy.cut()  # connections refused
    got = [code(ask(gw.url, k)) for k in (key_a, key_b, key_a, key_b)]
    # up to three tries each; a stops at its fifth failure (its own circuit), b at its fourth:
    # 9 of 10 outcomes failed, from 2 tenants, which opens it for everybody
    assert got == [(502, "upstream_error")] * 4
    assert code(ask(gw.url, key_c)) == (503, "circuit_open")  # c never failed, but this is an outage
    assert metrics(gw.url)["fairgate_backend_breaker_state"] == 2.0
    ready = httpx.get(gw.url + "/health/readiness")
    assert ready.status_code == 503 and ready.json()["checks"]["models"]["flaky"] is False
    proxy.restore()
    deadline = time.monotonic() + 30
    while (got_c := code(ask(gw.url, key_c))) != (200, None):  # refused until the interval ends
        assert got_c == (503, "circuit_open") and time.monotonic() < deadline, got_c
        time.sleep(0.2)
    assert breaker_view(admin)["state"] == "closed"
    m = metrics(gw.url)
    assert (m["fairgate_backend_breaker_state"], m["fairgate_backend_breaker_opened_total"]) == (0.0, 1.0)
    # a's own circuit opened just before the backend's: its probe goes now, and closes it
    assert [code(ask(gw.url, k)) for k in (key_a, key_b, key_c)] == [(200, None)] * 3
    assert breaker_view(admin)["tenants"] == {}


def test_retry_after_is_honoured(make_gateway, flaky):
    up, proxy = flaky
    gw, admin = make_gateway()
    admin.backend("flaky", f"http://127.0.0.1:{proxy.port}/v1", model="m")
    (_, key_a), (_, key_b) = keys(gw, admin, 2, open_s=2)
    try:
        up.behaviour.fail_headers = [(b"retry-after", b"0.3")]
        up.behaviour.fail_next[:] = [503]
        n = len(up.app.arrivals)
        assert code(ask(gw.url, key_a)) == (200, None)  # the retry waited, then was served
        first, second = up.app.arrivals[n:]
        assert second - first >= 0.29  # a lower bound the pause guarantees, not a timing figure
        up.behaviour.fail_headers = [(b"retry-after", b"20")]
        up.behaviour.fail_next[:] = [429]
        n = len(up.app.arrivals)
        assert ask(gw.url, key_a).status_code == 429  # longer than a request waits: not retried here
        r = ask(gw.url, key_a)  # a waits as asked: the upstream hears nothing of it
        assert code(r) == (503, "upstream_backoff") and 19 <= int(r.headers["retry-after"]) <= 20
        assert len(up.app.arrivals) == n + 1
        assert code(ask(gw.url, key_b)) == (200, None)  # b was not asked to wait
        m = metrics(gw.url)
        assert (m["fairgate_backend_breaker_state"], m["fairgate_backend_breaker_tenant_opened_total"]) == (0.0, 2.0)
    finally:
        up.behaviour.fail_headers = []


def test_bad_requests_from_two_tenants_never_open_the_circuit_a_third_needs(make_gateway, tiny_model_dir):
    # the engine answered `prompt: [-1]` with echo by a plain-text 500, which the gateway counted
    # as the upstream's fault: two tenants at 10 a second kept the local pool's circuit open
    from concurrent.futures import ThreadPoolExecutor

    from tests.helpers.engine_proc import EngineProcess

    with EngineProcess(tiny_model_dir) as engine:
        gw, admin = make_gateway()
        admin.backend("eng", engine.url + "/v1", model="tiny", kind="local")
        breaker = gw.state.backends["eng"].breaker
        breaker.policy = BreakerPolicy(open_s=60, min_requests=4, tenant_min_requests=2, min_tenants=2,
                                       single_tenant_failures=5)
        (_, bad_a), (_, bad_b), (_, good) = [(t["id"], admin.key(t["id"])["key"])
                                             for t in (admin.tenant(), admin.tenant(), admin.tenant())]
        assert gw.state.backends["eng"].breaker is breaker

        def bad(i: int) -> int:
            ids = [-1] if i % 2 else [99999999999]
            r = httpx.post(gw.url + "/v1/completions", headers={"authorization": f"Bearer {(bad_a, bad_b)[i % 2]}"},
                           json={"model": "eng", "prompt": ids, "echo": True, "max_tokens": 1}, timeout=30)
            assert "outside the vocabulary" in r.json()["error"]["message"], r.text
            return r.status_code

        with ThreadPoolExecutor(4) as pool:
            statuses = list(pool.map(bad, range(40)))
        assert statuses == [400] * 40
        # the engine's own code and param reach the client through the gateway
        body = {"prompt": "hi", "max_tokens": 1, "logit_bias": {"99999999": 1}}
        direct = httpx.post(engine.url + "/v1/completions", json=body, timeout=30).json()["error"]
        via = httpx.post(gw.url + "/v1/completions", headers={"authorization": f"Bearer {bad_a}"}, timeout=30,
                         json={"model": "eng", **body}).json()["error"]
        assert direct["param"] == "logit_bias" and (via["code"], via["param"]) == (direct["code"], direct["param"])
        view = breaker.snapshot()
        assert view["state"] == "closed" and view["tenants_open"] == 0 and view["window"]["failures"] == 0
        r = httpx.post(gw.url + "/v1/chat/completions", headers={"authorization": f"Bearer {good}"}, timeout=30,
                       json={"model": "eng", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 200, r.text
