"""/v1/responses through a real gateway (uvicorn, SQLite) to real recording backends on loopback,
driven by the openai SDK: the chat path's auth, key limits, KVKK routing (a sensitive input only
reaches the local backend) and one usage row per request, streamed or not."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from sqlalchemy import select

from gateway.db import make_engine
from gateway.settings import Settings
from gateway.tables import UsageRecord
from tests.gateway.harness import ADMIN_TOKEN, Admin, GatewayThread
from tests.helpers.rows import wait_for
from tests.helpers.upstream import UpstreamServer

TCKN = "10000000146"  # a valid Turkish identity number (checksum)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    db = f"sqlite:///{tmp_path_factory.mktemp('responses') / 'gw.db'}"
    with contextlib.ExitStack() as es:
        local, ext = es.enter_context(UpstreamServer()), es.enter_context(UpstreamServer())
        gw = es.enter_context(GatewayThread(Settings(admin_token=ADMIN_TOKEN, database_url=db,
                                                     embedded_engine=False, upstream_max_retries=0)))
        admin = Admin(gw.url)
        es.callback(admin.close)
        admin.backend("local-up", local.base_url, kind="local", model="up-model")
        admin.backend("ext-up", ext.base_url, kind="openai", model="up-model")
        rules = [{"match": {"model": "chat", "sensitivity": "sensitive"}, "backend": "local-up"},
                 {"match": {"model": "chat", "sensitivity": "public"}, "backend": "ext-up"}]
        saved = admin.client.put("/admin/routes", json=rules)
        assert saved.status_code == 200, saved.text
        tenant = admin.tenant(name="resp")
        key = admin.key(tenant["id"])["key"]
        small = admin.tenant(name="resp-small")
        admin.quota(small["id"], max_tokens_per_request=16)
        limited = admin.key(small["id"])["key"]
        client = es.enter_context(openai.OpenAI(base_url=gw.url + "/v1", api_key=key, max_retries=0, timeout=30))
        yield {"gw": gw, "db": db, "local": local, "ext": ext, "client": client, "key": key, "limited": limited}


def rows(db: str) -> dict[str, UsageRecord]:
    engine = make_engine(db)
    try:
        with engine.connect() as conn:
            return {r.request_id: r for r in conn.execute(select(UsageRecord))}
    finally:
        engine.dispose()


def test_create_goes_to_the_chat_path_and_records_usage(world: dict[str, Any]) -> None:
    before = len(rows(world["db"]))
    r = world["client"].responses.create(model="chat", instructions="Be brief.", input="Summarise the plan.",
                                         max_output_tokens=5)
    sent = world["ext"].received[-1]
    assert sent["messages"] == [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "Summarise the plan."}]
    assert sent["max_tokens"] == 5 and "input" not in sent
    assert r.output_text == "w0 w1 w2 w3 w4" and r.usage.output_tokens == 5 and r.usage.input_tokens == 5
    wait_for(lambda: len(rows(world["db"])) == before + 1)
    row = rows(world["db"])["chatcmpl-" + r.id.removeprefix("resp_")]
    assert (row.prompt_tokens, row.completion_tokens, row.backend, row.status) == (5, 5, "ext-up", "finished")


def test_stream_events_and_one_usage_row(world: dict[str, Any]) -> None:
    before = len(rows(world["db"]))
    kinds, text, final = [], "", None
    for ev in world["client"].responses.create(model="chat", input="Go on.", max_output_tokens=4, stream=True):
        kinds.append(ev.type)
        text += ev.delta if ev.type == "response.output_text.delta" else ""
        final = ev.response if ev.type == "response.incomplete" else final
    assert kinds[0] == "response.created" and kinds[-1] == "response.incomplete"  # cut at max_output_tokens
    assert world["ext"].received[-1]["stream"] is True
    assert final is not None and final.output_text == text == "w0 w1 w2 w3" and final.usage.output_tokens == 4
    wait_for(lambda: len(rows(world["db"])) == before + 1)
    row = rows(world["db"])["chatcmpl-" + final.id.removeprefix("resp_")]
    assert row.stream and row.completion_tokens == 4 and row.status == "finished"


def test_sensitive_input_never_leaves(world: dict[str, Any]) -> None:
    ext_before = len(world["ext"].received)
    for stream in (False, True):
        r = world["client"].responses.create(model="chat", input=f"Müşteri TCKN {TCKN}, kaydı güncelle.",
                                             max_output_tokens=3, stream=stream)
        if stream:
            for _ in r:
                pass
        assert TCKN in json.dumps(world["local"].received[-1], ensure_ascii=False)
    history = [{"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
               {"type": "function_call_output", "call_id": "c1", "output": f"kimlik {TCKN}"},
               {"role": "user", "content": "Devam et."}]
    world["client"].responses.create(model="chat", input=history, max_output_tokens=2)
    assert TCKN in json.dumps(world["local"].received[-1], ensure_ascii=False)
    assert len(world["ext"].received) == ext_before  # nothing of it reached the external API


def test_auth_and_limits_come_first_and_reserve_nothing(world: dict[str, Any]) -> None:
    url = world["gw"].url + "/v1/responses"
    body = {"model": "chat", "input": "Hi", "max_output_tokens": 3}
    gw = world["gw"]
    assert gw.call(gw.state.usage.flush())  # the earlier tests' rows are all in before counting
    before = len(rows(world["db"]))
    assert httpx.post(url, json=body).status_code == 401
    over = httpx.post(url, json={**body, "max_output_tokens": 64},
                      headers={"authorization": f"Bearer {world['limited']}"})
    assert over.status_code == 400 and over.json()["error"]["param"] == "max_output_tokens"
    refused = httpx.post(url, json={**body, "previous_response_id": "resp_x"},
                         headers={"authorization": f"Bearer {world['key']}"})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "previous_response_id"
    assert gw.call(gw.state.usage.flush())
    assert len(rows(world["db"])) == before
