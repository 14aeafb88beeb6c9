"""Both servers' OpenAPI documents fuzzed against the live servers on loopback (schemathesis):
for every documented operation, bounded, derandomized examples; no response may be a 5xx, and
each must match its documented media type and schema (errors: the OpenAI error object).

The gateway runs with SQLite and the in-process quota store in front of the loopback upstream;
the engine server with the tiny model. Tenant routes go first (the admin fuzzing registers
backends and pools whose addresses lead nowhere, which readiness would rightly report)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from fairgate.backends.local.engine.async_engine import AsyncEngine, EngineConfig  # noqa: E402
from fairgate.backends.local.serving.auth import EngineAuth  # noqa: E402
from fairgate.backends.local.serving.backend import LocalBackend  # noqa: E402
from fairgate.backends.local.serving.server import build_app  # noqa: E402
from fairgate.backends.metrics_access import MetricsAccess  # noqa: E402
from fairgate.gateway.settings import Settings  # noqa: E402
from tests.backends.local.test_engine_hygiene import serve  # noqa: E402
from tests.gateway.harness import ADMIN_TOKEN, Admin, GatewayThread  # noqa: E402
from tests.helpers.upstream import UpstreamServer  # noqa: E402

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
NEGATIVE_EXAMPLES = 3  # invalid requests: every one must be a 4xx OpenAI error, never a 5xx
EXAMPLES = 6  # per operation; the CPU goes to generating cases (hypothesis) more than to serving them


def fuzz(url: str, headers_for: Any, max_examples: int = EXAMPLES) -> tuple[int, list[str]]:
    """Run every operation of the server's document; (calls made, failures as text)."""
    schema = schemathesis.openapi.from_url(url + "/openapi.json")
    ops = [r.ok() for r in schema.get_all_operations()]
    ops.sort(key=lambda op: (op.path.startswith("/admin"), op.path, op.method))
    failures: list[str] = []
    calls = 0
    for op in ops:
        calls += _fuzz_operation(op, url, headers_for(op.path), max_examples, failures, GenerationMode.POSITIVE)
        calls += _fuzz_operation(op, url, headers_for(op.path), NEGATIVE_EXAMPLES, failures,
                                 GenerationMode.NEGATIVE)
    return calls, failures


def _fuzz_operation(op: Any, url: str, headers: dict[str, str], max_examples: int, failures: list[str],
                    mode: Any) -> int:
    calls = [0]

    @settings(max_examples=max_examples, deadline=None, derandomize=True, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=op.as_strategy(generation_mode=mode))
    def run(case: Any) -> None:
        calls[0] += 1
        try:
            case.call_and_validate(base_url=url, headers=headers, checks=CHECKS, timeout=60)
        except Exception as exc:  # noqa: BLE001 - collect them all, report at the end
            failures.append(f"{op.method.upper()} {op.path}: {str(exc)[:600]}")

    try:
        run()
    except Unsatisfiable:  # negative mode, an operation with nothing to get wrong (GET /health)
        assert mode == GenerationMode.NEGATIVE
    return calls[0]


def test_gateway_conforms_to_its_openapi(tmp_path: Path) -> None:
    with UpstreamServer() as up:
        s = Settings(admin_token=ADMIN_TOKEN, database_url=f"sqlite:///{tmp_path}/fz.db", embedded_engine=False)
        with GatewayThread(s) as gw:
            admin = Admin(gw.url)
            admin.backend("up", up.base_url, model="up-model")
            t = admin.tenant()
            admin.quota(t["id"], max_tokens_per_request=16)  # bounds what the upstream generates
            key = admin.key(t["id"])["key"]
            admin.close()
            doc = httpx.get(gw.url + "/openapi.json").json()
            assert {"/v1/chat/completions", "/v1/responses", "/v1/embeddings", "/v1/usage", "/admin/tenants",
                    "/admin/pools"} <= set(doc["paths"])
            assert "swagger-ui" in httpx.get(gw.url + "/docs").text

            def headers_for(path: str) -> dict[str, str]:
                admin_side = path.startswith(("/admin", "/metrics"))
                return {"authorization": f"Bearer {ADMIN_TOKEN if admin_side else key}"}

            calls, failures = fuzz(gw.url, headers_for)
    assert calls >= len(doc["paths"]) * 2
    assert failures == [], "\n".join(failures[:20])


def test_engine_conforms_to_its_openapi(tiny_model_dir: Path) -> None:
    engine = AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=64, max_model_len=64,
                                      served_model_name="tiny"))
    app = build_app(LocalBackend(engine), control_secret="ctl", auth=EngineAuth("engine-key"),
                    metrics=MetricsAccess())
    with serve(app) as (url, _):
        doc = httpx.get(url + "/openapi.json").json()
        assert {"/v1/completions", "/v1/chat/completions", "/v1/responses", "/v1/embeddings",
                "/control/fairness"} <= set(doc["paths"])

        def headers_for(path: str) -> dict[str, str]:
            return {"authorization": "Bearer ctl" if path.startswith("/control") else "Bearer engine-key"}

        calls, failures = fuzz(url, headers_for)
    assert calls >= len(doc["paths"]) * 2
    assert failures == [], "\n".join(failures[:20])
