"""The Responses API (`/v1/responses`) on a real `fairgate engine` process, driven by the openai
SDK: plain and streamed, instructions, message lists, function tools and call history, usage, and
the fields it cannot honour refused by name."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.helpers.engine_proc import engine_server

WEATHER = {"type": "object", "properties": {"c": {"enum": ["Ist", "Ank"]}}, "required": ["c"]}
ANSWER = {"type": "object", "properties": {"x": {"enum": ["yes", "no"]}}, "required": ["x"],
          "additionalProperties": False}
TOOLS = [{"type": "function", "name": "w", "parameters": WEATHER}]


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path) -> Iterator[str]:
    """The tiny model with its whole 512-token context (a tools prompt is long in its bytes)."""
    with engine_server(tiny_model_dir, "--served-model-name", "tiny", "--num-kv-blocks", "160",
                       "--max-model-len", "512") as url:
        yield url


def test_create_maps_onto_the_chat_path(client: openai.OpenAI) -> None:
    args = dict(model="tiny", instructions="Answer briefly.", input="What is a quota?", max_output_tokens=6,
                temperature=0)
    r = client.responses.create(**args)
    assert r.object == "response" and r.id.startswith("resp_") and r.model == "tiny"
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"  # random model: no eos
    assert r.usage.output_tokens == 6 and r.usage.total_tokens == r.usage.input_tokens + 6
    chat = client.chat.completions.create(model="tiny", max_tokens=6, temperature=0, messages=[
        {"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "What is a quota?"}])
    assert r.output_text == chat.choices[0].message.content  # the same generation, same prompt
    assert r.usage.input_tokens == chat.usage.prompt_tokens
    listed = client.responses.create(model="tiny", max_output_tokens=6, temperature=0, input=[
        {"role": "system", "content": "Answer briefly."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is a quota?"}]}])
    assert listed.output_text == r.output_text


def test_stream_events_add_up_to_the_response(client: openai.OpenAI) -> None:
    args = dict(model="tiny", input="Tell me a story.", max_output_tokens=24, temperature=0)
    whole = client.responses.create(**args)
    kinds, text, final = [], "", None
    for ev in client.responses.create(**args, stream=True):
        kinds.append(ev.type)
        if ev.type == "response.output_text.delta":
            text += ev.delta
        if ev.type in ("response.completed", "response.incomplete"):
            final = ev.response
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.incomplete"]
    # A reader that falls behind gets the engine's pending deltas merged into one (engine/stream.py), so on
    # a busy machine all 24 tokens can arrive as one delta; several deltas are checked on the converter itself
    # (tests/backends/test_responses_output.py), where the chunking is ours to choose.
    assert kinds.count("response.output_text.delta") >= 1 and text == whole.output_text
    assert final is not None and final.output_text == text and final.usage.output_tokens == 24
    # The SDK's stream helper wants `response.completed`: a reply the grammar ends (with eos).
    fmt = {"format": {"type": "json_schema", "name": "answer", "strict": True, "schema": ANSWER}}
    done = client.responses.create(model="tiny", input="Yes or no?", text=fmt, max_output_tokens=30, temperature=0)
    assert done.status == "completed" and json.loads(done.output_text)["x"] in ("yes", "no")
    with client.responses.stream(model="tiny", input="Yes or no?", text=fmt, max_output_tokens=30,
                                 temperature=0) as stream:
        for _ in stream:
            pass
        got = stream.get_final_response()
    assert got.output_text == done.output_text and got.usage.output_tokens == done.usage.output_tokens


def test_function_tools_and_call_history(client: openai.OpenAI) -> None:
    r = client.responses.create(model="tiny", input="W?", tools=TOOLS, tool_choice="required",
                                max_output_tokens=40, temperature=0)
    calls = [o for o in r.output if o.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "w" and calls[0].call_id.startswith("call_")
    assert json.loads(calls[0].arguments)["c"] in ("Ist", "Ank")
    streamed: dict[str, str] = {}
    for ev in client.responses.create(model="tiny", input="W?", tools=TOOLS, tool_choice="required",
                                      max_output_tokens=40, temperature=0, stream=True):
        if ev.type == "response.output_item.added" and ev.item.type == "function_call":
            streamed[ev.item.id] = ""
        elif ev.type == "response.function_call_arguments.delta":
            streamed[ev.item_id] += ev.delta
    assert list(streamed.values()) == [calls[0].arguments]
    output = {"type": "function_call_output", "call_id": calls[0].call_id, "output": "sunny"}
    follow = client.responses.create(model="tiny", max_output_tokens=4, input=[
        {"role": "user", "content": "W?"}, calls[0].model_dump(exclude_none=True), output])
    chat = client.chat.completions.create(model="tiny", max_tokens=4, messages=[
        {"role": "user", "content": "W?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": calls[0].call_id, "type": "function", "function": {
            "name": "w", "arguments": calls[0].arguments}}]},
        {"role": "tool", "tool_call_id": calls[0].call_id, "content": "sunny"}])
    assert follow.usage.input_tokens == chat.usage.prompt_tokens  # the history reached the template alike


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"previous_response_id": "resp_1"}, "previous_response_id"),
        ({"conversation": "conv_1"}, "conversation"),
        ({"store": True}, "store"),
        ({"background": True}, "background"),
        ({"tools": [{"type": "web_search"}]}, "tools"),
        ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input"),
        ({"input": [{"type": "reasoning", "summary": []}]}, "input"),
        ({"input": 3}, "input"),
        ({"include": ["reasoning.encrypted_content"]}, "include"),
        ({"reasoning": {"effort": "low"}}, "reasoning"),
        ({"max_output_tokens": 0}, "max_output_tokens"),
        ({"max_output_tokens": "8"}, "max_output_tokens"),
        ({"max_output_tokens": 4000}, "max_output_tokens"),
        ({"temperature": "hot"}, "temperature"),
        ({"instructions": ["a"]}, "instructions"),
        ({"frobnicate": 1}, "frobnicate"),
        ({"truncation": "auto"}, "truncation"),
    ],
)
def test_what_cannot_be_honoured_is_refused_by_name(server: str, extra: dict, param: str) -> None:
    body = {"model": "tiny", "input": "Hi", "max_output_tokens": 3, **extra}
    r = httpx.post(server + "/v1/responses", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param
