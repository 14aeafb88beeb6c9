"""Streamed tool calls (tool_stream.py): fed piece by piece, the deltas accumulate to exactly
what the non-streaming parse of the whole reply returns, and arguments arrive incrementally."""

from __future__ import annotations

import json

import pytest

from fairgate.backends.local.serving.json_scan import raw_arguments, scan_call, value_end
from fairgate.backends.local.serving.tool_stream import ToolCallStream
from fairgate.backends.local.serving.tools import ToolPlan

TOOLS = [{"type": "function", "function": {"name": "weather"}}]


def accumulate(plan: ToolPlan, text: str, step: int) -> tuple[str, dict[int, dict], list[int]]:
    """Feed `text` in pieces of `step` characters; (content, calls by index, fragments per call)."""
    stream = ToolCallStream(plan)
    content, calls, fragments = "", {}, []
    pieces = [text[i : i + step] for i in range(0, len(text), step)]
    for k, piece in enumerate(pieces):
        delta, tool_deltas = stream.feed(piece, final=k == len(pieces) - 1)
        content += delta
        for d in tool_deltas:
            if "id" in d:  # the first delta of a call: index, id, type, name, empty arguments
                assert d["type"] == "function" and d["function"]["arguments"] == "" and d["id"].startswith("call_")
                assert d["index"] == len(calls)
                calls[d["index"]] = {"name": d["function"]["name"], "arguments": ""}
                fragments.append(0)
            else:
                assert set(d) == {"index", "function"} and set(d["function"]) == {"arguments"}
                calls[d["index"]]["arguments"] += d["function"]["arguments"]
                fragments[d["index"]] += 1
    return content, calls, fragments


CASES = [
    ("hermes", "auto", 'Let me check. <tool_call>{"name": "weather", "arguments": {"city": "Ankara", "days": 2}}'
                       '</tool_call>'),
    ("hermes", "auto", '<tool_call>\n{"name": "weather", "arguments": {"city":"A\\"nk}ara", "d": [1, {"x": 2}]}}\n'
                       '</tool_call>\n<tool_call>{"arguments": {"zone": "UTC"}, "name": "time_in"}</tool_call>'),
    ("hermes", "auto", "No tool is needed here; the answer is 4 < 5."),
    ("hermes", "auto", '<tool_call>{"name": "noargs"}</tool_call>'),
    ("hermes", "auto", '<tool_call>{"name": "s", "arguments": "{\\"q\\": 1}"}</tool_call>'),
    ("llama3_json", "auto", '{"name": "weather", "parameters": {"city": "Istanbul"}}; {"name": "t", "parameters": {}}'),
    ("llama3_json", "auto", "<|python_tag|>{\"name\": \"weather\", \"parameters\": {\"city\": \"Istanbul\"}}"),
    ("llama3_json", "auto", "Plain answer, no call."),
    ("hermes", "required", '{"name": "weather", "arguments": {"city": "Ankara", "days": 3}}'),
    ("llama3_json", "named", '{"name": "weather", "arguments": {"city": "Istanbul", "days": 1}}'),
]


@pytest.mark.parametrize(("parser", "mode", "text"), CASES)
@pytest.mark.parametrize("step", [1, 3, 7, 1000])
def test_streamed_deltas_add_up_to_the_full_parse(parser: str, mode: str, text: str, step: int) -> None:
    plan = ToolPlan(TOOLS, mode, parser)
    content, calls, _ = accumulate(plan, text, step)
    want_content, want_calls = plan.parse(text)
    assert calls == {i: {"name": c.name, "arguments": c.arguments} for i, c in enumerate(want_calls)}
    assert content == (want_content or "")
    for c in want_calls:
        json.loads(c.arguments)


CUT = '{"name": "weather", "arguments": {"city": "Ank'  # a forced call that max_tokens cut


@pytest.mark.parametrize(("mode", "text", "want"), [
    ("named", CUT, [("weather", '{"city": "Ank')]),
    ("required", '{"name": "weather", "arguments": {"city": "Ankara", "days": 3}', [("weather", '{"city": "Ankara", "days": 3}')]),
    ("required", '{"name": "weather", "argu', [("weather", "")]),
    ("required", '{"name": "weather", "arguments": "a str', [("weather", "")]),
    ("named", '{"name": "wea', []),
    ("named", "", []),
])
@pytest.mark.parametrize("step", [1, 4, 1000])
def test_a_forced_call_cut_short_is_the_partial_call_streamed_or_not(mode: str, text: str, want: list,
                                                                    step: int) -> None:
    """Issue 37: a forced call cut by max_tokens is the call as far as it went, in `tool_calls`,
    with the same arguments text the stream sent; the JSON wrapper is never content."""
    plan = ToolPlan(TOOLS, mode, "hermes")
    content, calls = plan.parse(text)
    assert content is None and [(c.name, c.arguments) for c in calls] == want
    streamed_content, streamed, _ = accumulate(plan, text, step) if text else ("", {}, [])
    assert streamed_content == "" and [(c["name"], c["arguments"]) for c in streamed.values()] == want


def test_arguments_stream_in_fragments_and_equal_the_models_text() -> None:
    plan = ToolPlan(TOOLS, "auto", "hermes")
    text = '<tool_call>{"name": "weather", "arguments": {"city":  "Ankara",   "days": 2}}</tool_call>'
    _, calls, fragments = accumulate(plan, text, 2)
    assert fragments[0] > 5  # many argument deltas, not one at the end
    assert calls[0]["arguments"] == '{"city":  "Ankara",   "days": 2}'  # as written, not re-dumped
    assert plan.parse(text)[1][0].arguments == calls[0]["arguments"]


def test_the_name_goes_out_before_the_arguments_are_complete() -> None:
    stream = ToolCallStream(ToolPlan(TOOLS, "required", "hermes"))
    _, first = stream.feed('{"name": "weather", "argu')
    assert first[0]["function"] == {"name": "weather", "arguments": ""}
    _, more = stream.feed('ments": {"city": "An')
    assert more == [{"index": 0, "function": {"arguments": '{"city": "An'}}]


def test_content_that_may_be_a_tag_is_held_back() -> None:
    stream = ToolCallStream(ToolPlan(TOOLS, "auto", "hermes"))
    assert stream.feed("Sure <tool_")[0] == "Sure"
    content, calls = stream.feed('call>{"name": "weather", "arguments": {}}</tool_call>', final=True)
    assert content == "" and calls[0]["function"]["name"] == "weather"


def test_scanner_spans() -> None:
    assert value_end('"a\\"b", 1', 0) == 6
    assert value_end('{"a": [1, "}"]} tail', 0) == 15
    assert value_end('{"a": [1', 0) is None
    assert value_end("12", 0) is None and value_end("12,", 0) == 2
    scan = scan_call('{"arguments": {"x": 1}, "name": "f"}', 0)
    assert scan.name == "f" and scan.end is not None and (scan.args_start, scan.args_end) == (14, 22)
    assert scan_call("{1: 2}", 0).broken
    assert raw_arguments('{"name": "f", "arguments": "{}"}') is None
