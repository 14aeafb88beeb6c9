"""/v1/responses through a real gateway (uvicorn, SQLite) to real recording backends on loopback,
driven by the openai SDK: the chat path's auth, key limits, KVKK routing (a sensitive input only
reaches the local backend) and one usage row per request, streamed or not, found by the `resp_…`
id the client got; an upstream that resets mid-answer ends a stream with `response.failed` and a
whole answer with OpenAI's error."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from sqlalchemy import select

from fairgate.gateway.store.db import make_engine
from fairgate.gateway.store.routing_tables import RoutingAudit
from tests.gateway.harness import ADMIN_TOKEN, routing_gateway
from tests.helpers.raw_upstream import RawUpstream
from tests.helpers.rows import usage_rows, wait_for
from tests.helpers.upstream import UpstreamServer

TCKN = "10000000146"  # a valid Turkish identity number (checksum)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    db = f"sqlite:///{tmp_path_factory.mktemp('responses') / 'gw.db'}"
    with contextlib.ExitStack() as es:
        local, ext = es.enter_context(UpstreamServer()), es.enter_context(UpstreamServer())
        broken = es.enter_context(RawUpstream("reset"))  # two SSE events (or half a body), then RST
        gw, admin = es.enter_context(routing_gateway(db))
        admin.backend("local-up", local.base_url, kind="local", model="up-model")
        admin.backend("ext-up", ext.base_url, kind="openai", model="up-model")
        admin.backend("broken-up", broken.base_url, kind="openai", model="up-model")
        rules = [{"match": {"model": "chat", "sensitivity": "sensitive"}, "backend": "local-up"},
                 {"match": {"model": "chat", "sensitivity": "public"}, "backend": "ext-up"},
                 {"match": {"model": "broken", "sensitivity": "public"}, "backend": "broken-up"}]
        admin.routes(rules)
        tenant = admin.tenant(name="resp")
        key = admin.key(tenant["id"])["key"]
        small = admin.tenant(name="resp-small")
        admin.quota(small["id"], max_tokens_per_request=16)
        limited = admin.key(small["id"])["key"]
        client = es.enter_context(openai.OpenAI(base_url=gw.url + "/v1", api_key=key, max_retries=0, timeout=30))
        yield {"gw": gw, "db": db, "local": local, "ext": ext, "client": client, "key": key, "limited": limited,
               "broken": broken}


def test_create_goes_to_the_chat_path_and_records_usage(world: dict[str, Any]) -> None:
    before = len(usage_rows(world["db"]))
    r = world["client"].responses.create(model="chat", instructions="Be brief.", input="Summarise the plan.",
                                         max_output_tokens=5)
    sent = world["ext"].received[-1]
    assert sent["messages"] == [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "Summarise the plan."}]
    assert sent["max_tokens"] == 5 and "input" not in sent
    assert r.output_text == "w0 w1 w2 w3 w4" and r.usage.output_tokens == 5 and r.usage.input_tokens == 5
    wait_for(lambda: len(usage_rows(world["db"])) == before + 1)
    row = usage_rows(world["db"])[r.id]  # the usage row is keyed by the id the client got
    assert (row.prompt_tokens, row.completion_tokens, row.backend, row.status) == (5, 5, "ext-up", "finished")


def test_stream_events_and_one_usage_row(world: dict[str, Any]) -> None:
    before = len(usage_rows(world["db"]))
    kinds, text, final = [], "", None
    for ev in world["client"].responses.create(model="chat", input="Go on.", max_output_tokens=4, stream=True):
        kinds.append(ev.type)
        text += ev.delta if ev.type == "response.output_text.delta" else ""
        final = ev.response if ev.type == "response.incomplete" else final
    assert kinds[0] == "response.created" and kinds[-1] == "response.incomplete"  # cut at max_output_tokens
    assert world["ext"].received[-1]["stream"] is True
    assert final is not None and final.output_text == text == "w0 w1 w2 w3" and final.usage.output_tokens == 4
    wait_for(lambda: len(usage_rows(world["db"])) == before + 1)
    row = usage_rows(world["db"])[final.id]
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
    before = len(usage_rows(world["db"]))
    assert httpx.post(url, json=body).status_code == 401
    over = httpx.post(url, json={**body, "max_output_tokens": 64},
                      headers={"authorization": f"Bearer {world['limited']}"})
    assert over.status_code == 400 and over.json()["error"]["param"] == "max_output_tokens"
    refused = httpx.post(url, json={**body, "previous_response_id": "resp_x"},
                         headers={"authorization": f"Bearer {world['key']}"})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "previous_response_id"
    assert gw.call(gw.state.usage.flush())
    assert len(usage_rows(world["db"])) == before


def test_one_id_from_the_answer_to_the_usage_row_audit_and_log(world: dict[str, Any]) -> None:
    raw = world["client"].responses.with_raw_response.create(model="chat", input="Plan it.", max_output_tokens=3)
    r = raw.parse()
    assert r.id.startswith("resp_") and raw.headers["x-request-id"] == r.id
    with world["client"].responses.with_streaming_response.create(model="chat", input="Go.", max_output_tokens=2,
                                                                  stream=True) as streamed:
        header = streamed.headers["x-request-id"]
        ids = [json.loads(line[6:])["response"]["id"] for line in streamed.iter_lines()
               if line.startswith("data: ") and '"response.created"' in line]
    assert ids == [header] and header.startswith("resp_")
    gw = world["gw"]
    assert gw.call(gw.state.usage.flush())
    assert {r.id, header} <= set(usage_rows(world["db"]))
    listed = httpx.get(gw.url + "/admin/usage/requests", params={"limit": 1000},
                       headers={"authorization": f"Bearer {ADMIN_TOKEN}"}).json()["data"]
    assert {r.id, header} <= {e["id"] for e in listed}
    assert gw.call(gw.state.routing_audit.flush())
    engine = make_engine(world["db"])
    try:
        with engine.connect() as conn:
            audited = set(conn.execute(select(RoutingAudit.request_id)).scalars())
    finally:
        engine.dispose()
    assert {r.id, header} <= audited


def test_upstream_reset_mid_stream_ends_in_response_failed(world: dict[str, Any]) -> None:
    before = len(usage_rows(world["db"]))
    events = list(world["client"].responses.create(model="broken", input="Go on.", max_output_tokens=50,
                                                   stream=True))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.failed"
    assert "response.completed" not in kinds and "error" not in kinds
    failed = events[-1].response
    assert failed.status == "failed" and failed.error is not None and failed.error.code == "server_error"
    assert failed.error.message and failed.id == events[0].response.id
    assert [o.status for o in failed.output] == ["incomplete"] and failed.output_text == "ww"  # what arrived
    assert [e.sequence_number for e in events] == list(range(len(events)))
    wait_for(lambda: len(usage_rows(world["db"])) == before + 1)
    row = usage_rows(world["db"])[failed.id]
    assert (row.status, row.http_status, row.stream) == ("failed", 502, True)


def test_upstream_reset_whole_answer_is_an_openai_error(world: dict[str, Any]) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        world["client"].responses.create(model="broken", input="Go on.", max_output_tokens=5)
    err = caught.value
    assert err.status_code == 502 and isinstance(err.body, dict)
    assert err.body["type"] == "server_error" and err.body["message"]
    assert err.response.headers["content-type"].startswith("application/json")
