"""Multi-host: two gateway replicas and two engine servers, each in its own network namespace on
one bridge (10.231.N.0/24, inside a switch namespace this test creates; nothing is added to the
host's own namespace), Redis in the switch namespace, real clients in a client namespace.

- Requests sharing a tenant's system prompt land on the replica holding it, whichever gateway
  they enter (pool-wide prefix hit rate against random routing, same run, both printed).
- One engine host's link goes down mid-load: its requests fail over or end with a clear error,
  new requests go to the other host, every request has its usage row, no concurrency slot leaks.
- The link comes back: the host is re-admitted and takes requests again.

Skipped, saying why, where network namespaces cannot be created (not root, no `ip`).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fairgate.gateway.store.db import upgrade
from tests.gateway.harness import ADMIN_TOKEN, ROOT
from tests.helpers.engine_proc import EngineProcess
from tests.helpers.procs import stop_process

KEY, SECRET = "mh-engine-key", "mh-control"
HOSTS = {"e0": 10, "e1": 11, "g0": 20, "g1": 21, "c": 30}


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


def _can_netns() -> str | None:
    if shutil.which("ip") is None:
        return "the `ip` tool (iproute2) is not installed"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    probe = f"fgprobe{os.getpid()}"
    r = _ip("netns", "add", probe)
    if r.returncode != 0:
        return f"cannot create a network namespace here: {r.stderr.strip()}"
    _ip("netns", "del", probe)
    return None


class Net:
    """The namespaces, the bridge and the addresses of one test run."""

    def __init__(self) -> None:
        self.tag = f"fg{os.getpid() % 100000}"
        self.subnet = random.randrange(1, 250)
        self.made: list[str] = []

    def ns(self, host: str) -> str:
        return f"{self.tag}-{host}"

    def addr(self, host: str) -> str:
        return f"10.231.{self.subnet}.{HOSTS[host] if host != 'sw' else 1}"

    def run(self, ns: str, *cmd: str) -> None:
        r = subprocess.run(["ip", "netns", "exec", ns, *cmd], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, f"{cmd}: {r.stderr}"

    def build(self) -> None:
        sw = self.ns("sw")
        for name in [sw, *(self.ns(h) for h in HOSTS)]:
            assert _ip("netns", "add", name).returncode == 0
            self.made.append(name)
            self.run(name, "ip", "link", "set", "lo", "up")
        self.run(sw, "ip", "link", "add", "br0", "type", "bridge")
        self.run(sw, "ip", "addr", "add", f"{self.addr('sw')}/24", "dev", "br0")
        self.run(sw, "ip", "link", "set", "br0", "up")
        for h in HOSTS:
            self.run(sw, "ip", "link", "add", f"s-{h}", "type", "veth", "peer", "name", "eth0", "netns", self.ns(h))
            self.run(sw, "ip", "link", "set", f"s-{h}", "master", "br0", "up")
            self.run(self.ns(h), "ip", "addr", "add", f"{self.addr(h)}/24", "dev", "eth0")
            self.run(self.ns(h), "ip", "link", "set", "eth0", "up")

    def link(self, host: str, up: bool) -> None:
        self.run(self.ns("sw"), "ip", "link", "set", f"s-{host}", "up" if up else "down")

    def destroy(self) -> None:
        for name in reversed(self.made):
            _ip("netns", "del", name)


class Proc:
    def __init__(self, cmd: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log.open("w")
        self.p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        stop_process(self.p)
        self.log.close()


@pytest.fixture(scope="module")
def cluster(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    why = _can_netns()
    if why:
        pytest.skip(f"multi-host test needs network namespaces: {why}")
    tmp = tmp_path_factory.mktemp("multihost")
    net = Net()
    procs: list[Proc] = []
    engines: list[EngineProcess] = []
    try:
        net.build()
        base_env = {**os.environ, "PYTHONPATH": str(ROOT)}
        procs.append(Proc(["ip", "netns", "exec", net.ns("sw"), "redis-server", "--bind", net.addr("sw"),
                           "--port", "6379", "--save", "", "--appendonly", "no",
                           "--protected-mode", "no"],  # reachable only inside our namespaces
                          base_env, tmp / "redis.log"))
        for h in ("e0", "e1"):
            engines.append(EngineProcess(tiny_model_dir, "--api-key", KEY, "--control-secret", SECRET,
                                         host=net.addr(h), port=8100, prefix=("ip", "netns", "exec", net.ns(h))).start())
        db = f"sqlite:///{tmp}/gw.db"
        upgrade(db)
        for h in ("g0", "g1"):
            env = {**base_env, "FAIRGATE_DATABASE_URL": db, "FAIRGATE_REDIS_URL": f"redis://{net.addr('sw')}:6379/0",
                   "FAIRGATE_ADMIN_TOKEN": ADMIN_TOKEN, "FAIRGATE_EMBEDDED_ENGINE": "false",
                   "FAIRGATE_HOST": net.addr(h), "FAIRGATE_PORT": "8000", "FAIRGATE_ENGINE_API_KEY": KEY,
                   "FAIRGATE_CONTROL_SECRET": SECRET, "FAIRGATE_UPSTREAM_TIMEOUT_S": "4",
                   "FAIRGATE_USAGE_FLUSH_INTERVAL_S": "0.05"}
            procs.append(Proc(["ip", "netns", "exec", net.ns(h), sys.executable, "-m", "fairgate.gateway.cli", "serve"],
                              env, tmp / f"{h}.log"))
        c = {"net": net, "db": db, "tmp": tmp, "gw": [f"http://{net.addr(h)}:8000" for h in ("g0", "g1")]}
        for url in c["gw"]:
            wait(lambda u=url: client(net, [{"method": "GET", "url": u + "/health/liveness"}], timeout=2)[0]
                 ["status"] == 200, 90)
        setup_pools(c, engines)
        yield c
    finally:
        for e in engines:
            e.stop()
        for p in procs:
            p.stop()
        net.destroy()


def client(net: Net, requests: list[dict], concurrency: int = 1, timeout: float = 60) -> list[dict]:
    """Run the requests from the client namespace; the results in order."""
    plan = json.dumps({"requests": requests, "concurrency": concurrency, "timeout_s": timeout})
    r = subprocess.run(["ip", "netns", "exec", net.ns("c"), sys.executable, "-m", "tests.helpers.netns_client"],
                       input=plan, capture_output=True, text=True, cwd=ROOT, timeout=timeout + 120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def admin(c: dict, method: str, path: str, body: dict | None = None, gw: int = 0) -> dict:
    res = client(c["net"], [{"method": method, "url": c["gw"][gw] + path, "json": body,
                             "headers": {"authorization": f"Bearer {ADMIN_TOKEN}"}}])[0]
    assert res["status"] in (200, 201), res
    return res["body"]


def wait(cond, timeout: float = 30) -> None:
    deadline = time.time() + timeout
    while True:
        with contextlib.suppress(Exception):
            if cond():
                return
        assert time.time() < deadline, "condition not reached"
        time.sleep(0.5)


def setup_pools(c: dict, engines: list[EngineProcess]) -> None:
    replicas = [{"name": h, "base_url": f"http://{c['net'].addr(h)}:8100/v1"} for h in ("e0", "e1")]
    for name, policy in (("aff", "affinity"), ("rnd", "random")):
        admin(c, "POST", "/admin/pools", {"name": name, "kind": "local", "model": "tiny", "policy": policy,
                                          "api_key": KEY, "replicas": replicas})


def live(c: dict, pool: str, gw: int) -> dict[str, dict]:
    return {r["name"]: r["live"] for r in admin(c, "GET", f"/admin/pools/{pool}", gw=gw)["replicas"]}


def completion(c: dict, key: str, pool: str, prompt: list[int], gw: int, **extra) -> dict:
    body = {"model": pool, "prompt": prompt, "max_tokens": 2, "temperature": 0, **extra}
    return {"method": "POST", "url": c["gw"][gw] + "/v1/completions", "json": body,
            "headers": {"authorization": f"Bearer {key}"}, "stream": bool(extra.get("stream"))}


def hit_rate(c: dict, pool: str, tenants: int, per: int, seed: int) -> tuple[float, list[list[int]]]:
    rng = random.Random(seed)
    reqs, cached = [], []
    for t in range(tenants):
        tenant = admin(c, "POST", "/admin/tenants", {"name": f"{pool}-{t}"})
        key = admin(c, "POST", f"/admin/tenants/{tenant['id']}/keys", {})["key"]
        system = [rng.randrange(3, 500) for _ in range(64)]
        reqs += [completion(c, key, pool, system + [rng.randrange(3, 500) for _ in range(8)], gw=i % 2)
                 for i in range(per)]
    results = client(c["net"], reqs)  # one at a time: no prefix is ever still being computed
    assert all(r["status"] == 200 for r in results), results
    usage = [r["body"]["usage"] for r in results]
    for t in range(tenants):
        cached.append([u["prompt_tokens_details"]["cached_tokens"] for u in usage[t * per:(t + 1) * per]])
    return sum(sum(x) for x in cached) / sum(u["prompt_tokens"] for u in usage), cached


def test_shared_prompts_land_on_the_replica_holding_them(cluster: dict) -> None:
    aff, aff_cached = hit_rate(cluster, "aff", 4, 6, seed=1)
    rnd, _ = hit_rate(cluster, "rnd", 4, 6, seed=2)
    print(f"\npool-wide prefix hit rate: affinity {aff:.3f}, random {rnd:.3f}")
    # every request after a tenant's first found its whole system prompt, via either gateway
    assert aff_cached == [[0, 64, 64, 64, 64, 64]] * 4
    assert aff == pytest.approx(4 * 5 * 64 / (4 * 6 * 72)) and rnd < aff


def usage_rows(db: str, tenant_id: str) -> list[tuple[str, int]]:
    with contextlib.closing(sqlite3.connect(db.removeprefix("sqlite:///"))) as conn:
        return conn.execute("SELECT status, http_status FROM usage_records WHERE tenant_id = ?", (tenant_id,)).fetchall()


def test_engine_host_link_down_mid_load_then_back(cluster: dict) -> None:
    c, net = cluster, cluster["net"]
    tenant = admin(c, "POST", "/admin/tenants", {"name": "load"})
    admin(c, "PUT", f"/admin/tenants/{tenant['id']}/quota", {"max_concurrent": 100})
    key = admin(c, "POST", f"/admin/tenants/{tenant['id']}/keys", {})["key"]
    other = admin(c, "POST", "/admin/tenants", {"name": "other"})  # sends nothing during the outage
    admin(c, "PUT", f"/admin/tenants/{other['id']}/quota", {"max_concurrent": 100})
    other_key = admin(c, "POST", f"/admin/tenants/{other['id']}/keys", {})["key"]
    rng = random.Random(3)
    prompts = [[rng.randrange(3, 500) for _ in range(40)] for _ in range(32)]
    load = [completion(c, key, "aff", p, gw=i % 2, max_tokens=200, ignore_eos=True, stream=i % 4 >= 2)
            for i, p in enumerate(prompts)]
    plan = c["tmp"] / "load.json"
    plan.write_text(json.dumps({"requests": load, "concurrency": 32, "timeout_s": 60}))
    with plan.open() as stdin:
        proc = subprocess.Popen(["ip", "netns", "exec", net.ns("c"), sys.executable, "-m",
                                 "tests.helpers.netns_client"], stdin=stdin, stdout=subprocess.PIPE, text=True,
                                cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    time.sleep(0.8)  # requests in flight on both hosts
    net.link("e1", up=False)
    out, _ = proc.communicate(timeout=180)
    results = json.loads(out)
    print(f"\nduring the outage: {sum(r['status'] == 200 for r in results)} of {len(results)} answered 200, "
          f"{sum('lines' in r and any('error' in x for x in r['lines']) for r in results)} streams ended in error")
    for r in results:  # finished, failed over, or a clear OpenAI error: never a hang or a cut socket
        assert r["status"] in (200, 502, 503, 504), r
        if r["status"] != 200:  # a refused stream's error body comes back as its lines
            body = r["body"] if "body" in r else json.loads("".join(r["lines"]))
            assert set(body["error"]) == {"message", "type", "code", "param"}, r
        elif "lines" in r:
            assert r["lines"][-1] == "data: [DONE]", r
            errors = [json.loads(x[6:])["error"] for x in r["lines"][:-1] if '"error"' in x]
            assert all(set(e) == {"message", "type", "code", "param"} for e in errors), errors
    # e1 ejected, e0 routable (an overloaded e0 that timed out a request is ejected too, until
    # its probes pass)
    wait(lambda: all((r := live(c, "aff", g))["e1"]["healthy"] is False and r["e0"]["healthy"] for g in (0, 1)), 30)
    # The outage was one host's and one tenant's failures: e0's circuit stayed closed for
    # everybody, so another tenant's new requests go to e0 at once (no breaker to wait out; the
    # load tenant's own circuits, opened by its failures, let one probe through each).
    assert all(live(c, "aff", g)["e0"]["breaker"]["state"] == "closed" for g in (0, 1))
    after = client(net, [completion(c, other_key, "aff", p, gw=i % 2) for i, p in enumerate(prompts[:8])],
                   concurrency=4)
    assert [r["status"] for r in after] == [200] * 8, after  # new requests go to e0
    wait(lambda: len(usage_rows(c["db"], tenant["id"])) >= 32, 30)
    rows = usage_rows(c["db"], tenant["id"])
    assert all(status in ("finished", "failed", "disconnected") for status, _ in rows), rows
    zcard = subprocess.run(["ip", "netns", "exec", net.ns("sw"), "redis-cli", "-h", net.addr("sw"), "ZCARD",
                            f"fairgate:{{t:{tenant['id']}}}:q:t:{tenant['id']}:conc"], capture_output=True, text=True, timeout=10)
    assert zcard.stdout.strip() == "0"  # no concurrency slot held by a finished request
    net.link("e1", up=True)
    wait(lambda: all(live(c, "aff", g)["e1"]["healthy"] is True for g in (0, 1)), 30)
    before = live(c, "aff", 0)["e1"]["requests"] + live(c, "aff", 1)["e1"]["requests"]
    back = client(net, [completion(c, other_key, "aff", p, gw=i % 2) for i, p in enumerate(prompts)],
                  concurrency=4)
    assert [r["status"] for r in back] == [200] * 32, back
    assert live(c, "aff", 0)["e1"]["requests"] + live(c, "aff", 1)["e1"]["requests"] > before  # re-admitted
