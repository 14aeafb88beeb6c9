"""The engine server's key: tenant headers only from a caller holding it, loopback by default,
and the gateway sends the key of a `local` backend row. Real processes on loopback."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from fairgate.backends.local.serving.auth import EngineAuth, check_bind
from fairgate.backends.openai_wire import WireError
from fairgate.gateway.settings import Settings
from tests.gateway.harness import ADMIN_TOKEN, ROOT, Admin, GatewayThread
from tests.helpers.engine_proc import EngineProcess

KEY = "engine-key-1"
CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


@pytest.fixture(scope="module")
def engine(tiny_model_dir: Path) -> Iterator[EngineProcess]:
    with EngineProcess(tiny_model_dir, "--api-key", KEY, "--allow-anonymous") as e:
        yield e


def post(url: str, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(url + "/v1/chat/completions", json=CHAT, headers=headers, timeout=60)


def test_tenant_headers_need_the_key(engine: EngineProcess) -> None:
    victim = {"x-tenant": "victim", "x-priority": "interactive"}
    r = post(engine.url, victim)
    assert r.status_code == 403
    assert r.json()["error"] == {"message": "x-tenant is accepted only from a caller holding the engine's API key.",
                                 "type": "permission_error", "code": "tenant_header_needs_key", "param": "x-tenant"}
    r = post(engine.url, {"x-cache-salt": "victim"})
    assert r.status_code == 403 and r.json()["error"]["param"] == "x-cache-salt"
    r = post(engine.url, {"authorization": "Bearer wrong", **victim})
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    assert post(engine.url, {"authorization": f"Bearer {KEY}", **victim}).status_code == 200
    assert post(engine.url, {}).status_code == 200  # anonymous, no tenant named: allowed here


def test_openai_client_with_the_key(engine: EngineProcess) -> None:
    with openai.OpenAI(base_url=engine.url + "/v1", api_key=KEY, max_retries=0) as c:
        assert [m.id for m in c.models.list().data] == ["tiny"]
    with openai.OpenAI(base_url=engine.url + "/v1", api_key="nope", max_retries=0) as c:
        with pytest.raises(openai.AuthenticationError):
            c.models.list()


def test_strict_mode_refuses_callers_without_the_key() -> None:
    auth = EngineAuth(KEY)
    with pytest.raises(WireError) as exc:
        auth.trusted({})
    assert (exc.value.status, exc.value.code) == (401, "missing_api_key")
    assert auth.trusted({"authorization": f"Bearer {KEY}", "x-tenant": "a"}) is True
    assert EngineAuth().trusted({"x-tenant": "a"}) is True  # open server: loopback only, below


def test_no_key_refuses_a_non_loopback_host(tiny_model_dir: Path) -> None:
    with pytest.raises(SystemExit):
        check_bind("0.0.0.0", None, insecure=False)
    check_bind("0.0.0.0", KEY, insecure=False)
    check_bind("::1", None, insecure=False)
    out = subprocess.run([sys.executable, "-m", "fairgate.gateway.cli", "engine", "--model", str(tiny_model_dir),
                          "--host", "0.0.0.0", "--port", "0"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 1 and "refusing to listen on 0.0.0.0 without --api-key" in out.stderr


def test_the_gateway_sends_the_backend_rows_key(engine: EngineProcess, tmp_path: Path) -> None:
    settings = Settings(admin_token=ADMIN_TOKEN, database_url=f"sqlite:///{tmp_path}/gw.db", embedded_engine=False)
    with GatewayThread(settings) as gw:
        admin = Admin(gw.url)
        admin.backend("keyed", engine.url + "/v1", kind="local", model="tiny", api_key=KEY)
        admin.backend("keyless", engine.url + "/v1", kind="local", model="tiny")
        key = admin.key(admin.tenant()["id"])["key"]
        h = {"authorization": f"Bearer {key}"}
        ok = httpx.post(gw.url + "/v1/chat/completions", json={**CHAT, "model": "keyed"}, headers=h, timeout=60)
        assert ok.status_code == 200, ok.text
        # without the key the engine refuses the gateway's tenant headers: no silent downgrade
        bad = httpx.post(gw.url + "/v1/chat/completions", json={**CHAT, "model": "keyless"}, headers=h, timeout=60)
        assert bad.status_code == 403
        assert bad.json()["error"]["message"] == ("backend keyless refused the request: x-tenant is accepted "
                                                  "only from a caller holding the engine's API key.")
        admin.close()
