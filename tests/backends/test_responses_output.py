"""The Responses events built from chat chunks: how a stream ends when it fails (`response.failed`
with the output so far) and when it finishes."""

from __future__ import annotations

from typing import Any

import orjson

from fairgate.backends.openai_wire.responses_output import ResponsesOutput

REQUEST = {"model": "m", "input": "hi", "max_output_tokens": 8}


def events(raw: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line[6:]) for line in raw.split(b"\n") if line.startswith(b"data: ")]


def text_chunk(text: str) -> dict[str, Any]:
    return {"model": "m", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}


def call_chunk(args: str, first: bool) -> dict[str, Any]:
    call: dict[str, Any] = {"index": 0, "function": {"arguments": args}}
    if first:
        call.update(id="call_1", type="function", function={"name": "f", "arguments": args})
    return {"model": "m", "choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]}


def test_a_failure_mid_text_keeps_the_text_as_an_incomplete_message() -> None:
    out = ResponsesOutput(REQUEST, "abc")
    got = events(out.frame([text_chunk("Mer")]) + out.frame([text_chunk("haba")]) + out.failed("upstream reset", 502))
    assert [e["type"] for e in got] == ["response.created", "response.in_progress", "response.output_item.added",
                                        "response.content_part.added", "response.output_text.delta",
                                        "response.output_text.delta", "response.failed"]
    assert [e["sequence_number"] for e in got] == list(range(7))
    failed = got[-1]["response"]
    assert failed["id"] == "resp_abc" and failed["status"] == "failed"
    assert failed["error"] == {"code": "server_error", "message": "upstream reset"}
    assert failed["incomplete_details"] is None and failed["usage"] is None
    (item,) = failed["output"]
    assert item["status"] == "incomplete" and item["content"][0]["text"] == "Merhaba"


def test_a_failure_inside_a_tool_call_and_before_anything_arrived() -> None:
    out = ResponsesOutput(REQUEST, "abc")
    raw = out.frame([text_chunk("ok")]) + out.frame([call_chunk('{"a"', True)]) + out.failed("slow down", 429)
    failed = events(raw)[-1]["response"]
    assert [(o["type"], o["status"]) for o in failed["output"]] == [("message", "completed"),
                                                                     ("function_call", "incomplete")]
    assert failed["output"][1]["arguments"] == '{"a"' and failed["error"]["code"] == "rate_limit_exceeded"
    empty = ResponsesOutput(REQUEST, "xyz")
    got = events(empty.failed("engine shut down", 503))
    assert [e["type"] for e in got] == ["response.created", "response.in_progress", "response.failed"]
    assert got[-1]["response"]["output"] == []


def test_the_end_is_completed_or_incomplete_at_max_output_tokens() -> None:
    out = ResponsesOutput(REQUEST, "abc")
    out.frame([text_chunk("a"), {"model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}])
    done = events(out.end())[-1]
    assert done["type"] == "response.incomplete" and done["response"]["status"] == "incomplete"
    assert done["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    stopped = ResponsesOutput(REQUEST, "def")
    got = events(stopped.end())  # nothing came at all: still opened, one empty message, completed
    assert [e["type"] for e in got][:2] == ["response.created", "response.in_progress"]
    assert got[-1]["type"] == "response.completed" and got[-1]["response"]["output"][0]["content"][0]["text"] == ""
