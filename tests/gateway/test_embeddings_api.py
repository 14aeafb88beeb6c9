"""/v1/embeddings through a real gateway (uvicorn, SQLite) driven by the openai SDK: a real
`fairgate engine` process as the local backend, a recording OpenAI-compatible server as the
external one. Auth, quota, KVKK routing (a sensitive input is embedded locally, never sent out,
or refused with 503 when no local backend can take it) and one usage row per request."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.gateway.harness import routing_gateway
from tests.helpers.engine_proc import engine_server
from tests.helpers.rows import usage_rows, wait_for
from tests.helpers.upstream import UpstreamServer

TCKN = "10000000146"  # a valid Turkish identity number (checksum)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Iterator[dict[str, Any]]:
    db = f"sqlite:///{tmp_path_factory.mktemp('embeddings') / 'gw.db'}"
    with contextlib.ExitStack() as es:
        engine = es.enter_context(engine_server(tiny_model_dir, "--served-model-name", "tiny"))
        ext = es.enter_context(UpstreamServer())
        gw, admin = es.enter_context(routing_gateway(db))
        admin.backend("engine", engine + "/v1", kind="local", model="tiny")
        admin.backend("ext-up", ext.base_url, kind="openai", model="up-embed")
        rules = [{"match": {"model": "embed", "sensitivity": "sensitive"}, "backend": "engine"},
                 {"match": {"model": "embed", "sensitivity": "public"}, "backend": "ext-up"},
                 {"match": {"model": "ext-only", "sensitivity": "public"}, "backend": "ext-up"}]
        admin.routes(rules)
        tenant = admin.tenant(name="emb")
        key = admin.key(tenant["id"])["key"]
        client = es.enter_context(openai.OpenAI(base_url=gw.url + "/v1", api_key=key, max_retries=0, timeout=60))
        yield {"gw": gw, "db": db, "ext": ext, "client": client, "key": key, "admin": admin}


def test_public_input_goes_to_the_routed_backend_with_usage(world: dict[str, Any]) -> None:
    before = set(usage_rows(world["db"]))
    r = world["client"].embeddings.create(model="embed", input=["bir iki üç", "four five"], encoding_format="float")
    assert world["ext"].received[-1] == {"model": "up-embed", "input": ["bir iki üç", "four five"],
                                         "encoding_format": "float"}
    assert [d.embedding for d in r.data] == [[0.0, 3.0, 1.0], [1.0, 2.0, 1.0]] and r.model == "embed"
    assert r.usage.prompt_tokens == 5
    wait_for(lambda: len(set(usage_rows(world["db"])) - before) == 1)
    (rid,) = set(usage_rows(world["db"])) - before
    row = usage_rows(world["db"])[rid]
    assert rid.startswith("embd-") and (row.prompt_tokens, row.completion_tokens, row.backend) == (5, 0, "ext-up")


def test_sensitive_input_is_embedded_locally_and_never_leaves(world: dict[str, Any]) -> None:
    sent_before = len(world["ext"].received)
    before = set(usage_rows(world["db"]))
    r = world["client"].embeddings.create(model="embed", input=[f"TCKN {TCKN} kaydı", "plain words"])
    assert len(r.data) == 2 and len(r.data[0].embedding) == 64  # the tiny engine's hidden size, decoded base64
    norm = sum(x * x for x in r.data[0].embedding) ** 0.5
    assert abs(norm - 1.0) < 1e-4  # L2-normalised
    assert len(world["ext"].received) == sent_before
    assert TCKN not in json.dumps(world["ext"].received, ensure_ascii=False)
    wait_for(lambda: len(set(usage_rows(world["db"])) - before) == 1)
    (rid,) = set(usage_rows(world["db"])) - before
    row = usage_rows(world["db"])[rid]
    assert row.backend == "engine" and row.prompt_tokens == r.usage.prompt_tokens > 0 and row.completion_tokens == 0
    # No local backend on this route: refused, never sent out.
    refused = httpx.post(world["gw"].url + "/v1/embeddings", json={"model": "ext-only", "input": f"no {TCKN}"},
                         headers={"authorization": f"Bearer {world['key']}"})
    assert refused.status_code == 503, refused.text
    assert len(world["ext"].received) == sent_before


def test_auth_bad_input_and_quota_reserve_nothing(world: dict[str, Any]) -> None:
    url = world["gw"].url + "/v1/embeddings"
    before = len(usage_rows(world["db"]))
    assert httpx.post(url, json={"model": "embed", "input": "x"}).status_code == 401
    auth = {"authorization": f"Bearer {world['key']}"}
    for body, param in (({"model": "embed", "input": ""}, "input"),
                        ({"model": "embed", "input": "x", "encoding_format": "int8"}, "encoding_format"),
                        ({"input": "x"}, "model")):
        r = httpx.post(url, json=body, headers=auth)
        assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text
    small = world["admin"].tenant(name="emb-small")
    world["admin"].quota(small["id"], requests_per_minute=1)
    small_key = world["admin"].key(small["id"])["key"]
    ok = httpx.post(url, json={"model": "embed", "input": "x y"}, headers={"authorization": f"Bearer {small_key}"})
    limited = httpx.post(url, json={"model": "embed", "input": "x y"}, headers={"authorization": f"Bearer {small_key}"})
    assert ok.status_code == 200 and limited.status_code == 429
    wait_for(lambda: len(usage_rows(world["db"])) == before + 1)  # the refused ones left no row
