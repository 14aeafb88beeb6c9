"""A Responses stream whose generation fails after it opened ends with `response.failed`, read
by the openai SDK from real processes on loopback: a `fairgate engine` stopped (SIGTERM) in the
middle of an answer, and the same engine SIGKILLed behind a gateway. The response object says
"failed" with an `error` {code, message} and the text so far; nothing chat-style is sent, the
stream is not just cut (a whole answer cut alike gets OpenAI's error body with a 503), and the gateway's usage row (keyed by the same `resp_…` id) says failed."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from sqlalchemy import select

from fairgate.gateway.store.db import make_engine
from fairgate.gateway.store.tables import UsageRecord
from tests.faults.engines import wait_until
from tests.gateway.harness import GatewayThread, routing_gateway
from tests.helpers.engine_proc import EngineProcess
from tests.helpers.rows import wait_for
from tests.helpers.tiny_models import make_tiny_model

LONG = 4000  # output tokens: ~15 s for this model, far past the engine's 4 s shutdown grace
ARGS = ("--max-model-len", "4096", "--num-kv-blocks", "320", "--max-num-batched-tokens", "256")
BODY: dict[str, Any] = {"model": "tiny", "input": "Tell me everything.", "max_output_tokens": LONG,
                        "temperature": 0, "extra_body": {"ignore_eos": True}}


@pytest.fixture(scope="module")
def slow_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Eight layers of 256: a few hundred tokens/s on the CPU, so an answer is still running
    when the engine is stopped or killed."""
    return make_tiny_model(tmp_path_factory.mktemp("tiny-slow"), "llama", max_position_embeddings=4096,
                           num_hidden_layers=8, hidden_size=256, intermediate_size=1024)


def _read_until_signal(client: openai.OpenAI, proc: EngineProcess, sig: int, after: int,
                       model: str = "tiny") -> list[Any]:
    """Stream BODY; once `after` text deltas arrived, send `sig` to the engine; every event."""
    events: list[Any] = []
    deltas = lambda: sum(e.type == "response.output_text.delta" for e in events)  # noqa: E731
    assert proc.proc is not None
    sender = threading.Thread(target=lambda: (wait_until(lambda: deltas() >= after, 60),
                                              proc.proc.send_signal(sig)), daemon=True)  # type: ignore[union-attr]
    sender.start()
    for event in client.responses.create(**{**BODY, "model": model}, stream=True):
        events.append(event)
    sender.join(10)
    return events


def _assert_failed(events: list[Any], message_part: str | None = None) -> Any:
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.failed"
    assert not {"response.completed", "response.incomplete", "error"} & set(kinds)
    failed = events[-1].response
    assert failed.status == "failed" and failed.id == events[0].response.id
    assert failed.error is not None and failed.error.code == "server_error" and failed.error.message
    if message_part is not None:
        assert message_part in failed.error.message
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text and failed.output_text == text and failed.output[0].status == "incomplete"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    return failed


@pytest.mark.timeout(300)
def test_engine_stopped_mid_stream_sends_response_failed(slow_model_dir: Path) -> None:
    whole: list[BaseException] = []

    def whole_answer(client: openai.OpenAI) -> None:  # a non-streamed request running meanwhile
        try:
            client.responses.create(**BODY)
        except openai.APIError as exc:
            whole.append(exc)

    with EngineProcess(slow_model_dir, *ARGS) as proc, \
            openai.OpenAI(base_url=proc.url + "/v1", api_key="unused", max_retries=0, timeout=120) as client:
        waiting = threading.Thread(target=whole_answer, args=(client,), daemon=True)
        waiting.start()
        events = _read_until_signal(client, proc, signal.SIGTERM, after=5)
        waiting.join(30)
        # it stopped (uvicorn re-raises the signal it shut down on), after telling the client
        assert proc.proc is not None and proc.proc.wait(30) in (0, -signal.SIGTERM)
    failed = _assert_failed(events, "engine shut down")
    assert 5 <= len(failed.output_text) and sum(e.type == "response.output_text.delta" for e in events) < LONG
    # the whole answer cut by the same shutdown: OpenAI's error body with a 503
    (err,) = whole
    assert isinstance(err, openai.APIStatusError) and err.status_code == 503
    assert isinstance(err.body, dict) and err.body["type"] == "server_error" and "engine shut down" in err.body["message"]


@pytest.fixture
def gateway_over(slow_model_dir: Path, tmp_path: Path) -> Iterator[tuple[GatewayThread, EngineProcess, str]]:
    db = f"sqlite:///{tmp_path / 'gw.db'}"
    with contextlib.ExitStack() as es:
        proc = es.enter_context(EngineProcess(slow_model_dir, *ARGS))
        gw, admin = es.enter_context(routing_gateway(db))
        admin.backend("eng", proc.url + "/v1", kind="local", model="tiny")
        tenant = admin.tenant(name="resp-fail")
        yield gw, proc, admin.key(tenant["id"])["key"]


@pytest.mark.timeout(300)
def test_engine_killed_behind_the_gateway_sends_response_failed(gateway_over: Any) -> None:
    gw, proc, key = gateway_over
    with openai.OpenAI(base_url=gw.url + "/v1", api_key=key, max_retries=0, timeout=120) as client:
        events = _read_until_signal(client, proc, signal.SIGKILL, after=5, model="eng")
    failed = _assert_failed(events)
    assert gw.call(gw.state.usage.flush())
    engine = make_engine(gw.state.settings.database_url)
    try:
        with engine.connect() as conn:
            wait_for(lambda: conn.execute(select(UsageRecord).where(
                UsageRecord.request_id == failed.id)).first() is not None)
            row = conn.execute(select(UsageRecord).where(UsageRecord.request_id == failed.id)).one()
    finally:
        engine.dispose()
    assert (row.status, row.http_status, row.stream) == ("failed", 502, True)
    assert row.completion_tokens >= sum(e.type == "response.output_text.delta" for e in events) - 1
