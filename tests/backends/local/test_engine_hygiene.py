"""The engine server's front door under the protocol `fairgate engine` runs: header limits (431),
one Authorization header, the bearer scheme in any case, and /metrics behind the metrics token
or the engine's API key, with no tenant labels unless asked."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import httpx
import pytest

from fairgate.backends.http_protocol import limited_protocol
from fairgate.backends.local.engine.async_engine import AsyncEngine, EngineConfig
from fairgate.backends.local.serving.auth import EngineAuth
from fairgate.backends.local.serving.backend import LocalBackend
from fairgate.backends.local.serving.server import build_app
from fairgate.backends.metrics_access import MetricsAccess
from fairgate.backends.openai_wire.headers import HeaderLimits
from tests.gateway.test_http_hygiene import _error, _raw
from tests.helpers.app_thread import serve_app


def serve(app: Any) -> contextlib.AbstractContextManager[tuple[str, int]]:
    """`app` under the header limits `fairgate engine` enforces; (base URL, port)."""
    return serve_app(app, http=limited_protocol(HeaderLimits()))


@pytest.fixture
def engine(tiny_model_dir: Path) -> AsyncEngine:
    return AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=16, served_model_name="tiny"))


def test_engine_header_limits_and_auth_parsing(engine: AsyncEngine) -> None:
    app = build_app(LocalBackend(engine), auth=EngineAuth("engine-key"))
    with serve(app) as (url, port):
        reply, sent = _raw(port, b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: " + b"z" * (50 << 20))
        status, body = _error(reply)
        assert status == 431 and body["error"]["type"] == "invalid_request_error"
        assert sent < 20 << 20
        r = httpx.get(url + "/v1/models", headers={f"x-{i}": "v" for i in range(150)})
        assert r.status_code == 431 and r.json()["error"]["code"] == "request_header_fields_too_large"
        for scheme in ("bearer", "BEARER", "Bearer"):
            assert httpx.get(url + "/v1/models", headers={"authorization": f"{scheme} engine-key"}).status_code == 200
        two = [("authorization", "Bearer engine-key"), ("authorization", "Bearer engine-key")]
        r = httpx.post(url + "/v1/completions", json={"prompt": "a", "max_tokens": 1}, headers=two)
        assert r.status_code == 400 and r.json()["error"]["code"] == "duplicate_authorization"


def test_engine_metrics_need_the_key_and_hide_tenants(engine: AsyncEngine, monkeypatch) -> None:
    monkeypatch.delenv("FAIRGATE_METRICS_TOKEN", raising=False)
    app = build_app(LocalBackend(engine), auth=EngineAuth("engine-key"), metrics=MetricsAccess(token="scrape"))
    with serve(app) as (url, _):
        key = {"authorization": "Bearer engine-key"}
        r = httpx.post(url + "/v1/completions", json={"prompt": "hello", "max_tokens": 2},
                       headers={**key, "x-tenant": "acme-secret-tenant"}, timeout=60)
        assert r.status_code == 200, r.text
        anon = httpx.get(url + "/metrics")
        assert anon.status_code == 401 and anon.json()["error"]["code"] == "invalid_metrics_token"
        assert httpx.get(url + "/metrics", headers={"authorization": "Bearer wrong"}).status_code == 401
        assert httpx.get(url + "/metrics", headers={"authorization": "bearer scrape"}).status_code == 200
        text = httpx.get(url + "/metrics", headers=key).text
        assert "fairgate_prompt_tokens_total{" in text
        assert "acme-secret-tenant" not in text and 'tenant=""' in text


def test_keyless_engine_serves_metrics_to_its_trusted_callers(engine: AsyncEngine, monkeypatch) -> None:
    monkeypatch.delenv("FAIRGATE_METRICS_TOKEN", raising=False)
    with serve(build_app(LocalBackend(engine))) as (url, _):
        assert httpx.get(url + "/metrics").status_code == 200
