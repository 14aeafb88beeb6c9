"""Tool calling on a real `fairgate engine` process with the demo model's template, driven by the
openai SDK (every tool_choice, streamed tool calls, tool history), and `required` on a
random-weight model, where only the grammar makes the call."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import jsonschema
import openai
import pytest

from tests.helpers.engine_proc import engine_server

DEMO = Path(__file__).resolve().parents[2] / "models" / "fairgate-demo"
WEATHER = {"type": "object", "properties": {"city": {"enum": ["Istanbul", "Ankara"]},
                                            "days": {"type": "integer", "minimum": 1, "maximum": 7}},
           "required": ["city", "days"], "additionalProperties": False}
TOOLS = [
    {"type": "function", "function": {"name": "weather", "description": "Forecast", "parameters": WEATHER}},
    {"type": "function", "function": {"name": "time_in", "parameters": {
        "type": "object", "properties": {"zone": {"enum": ["UTC", "TRT"]}}, "required": ["zone"],
        "additionalProperties": False}}},
]
MSGS = [{"role": "developer", "content": "Use the tools."}, {"role": "user", "content": "Weather in Ankara?"}]


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with engine_server(DEMO, "--served-model-name", "demo", "--max-model-len", "512",
                       "--tool-call-parser", "hermes") as url:
        yield url


@pytest.fixture(scope="module")
def client(server: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server + "/v1", api_key="unused", max_retries=0, timeout=120) as c:
        yield c


def test_required_always_parses_and_matches_the_schema(client: openai.OpenAI) -> None:
    for seed in range(10):
        r = client.chat.completions.create(model="demo", messages=MSGS, tools=TOOLS, tool_choice="required",
                                           max_tokens=60, seed=seed)
        choice = r.choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.content is None
        call = choice.message.tool_calls[0]
        assert call.type == "function" and call.id.startswith("call_")
        schema = {"weather": WEATHER, "time_in": TOOLS[1]["function"]["parameters"]}[call.function.name]
        jsonschema.validate(json.loads(call.function.arguments), schema)


def test_named_auto_and_none(client: openai.OpenAI) -> None:
    named = client.chat.completions.create(model="demo", messages=MSGS, tools=TOOLS, max_tokens=60, seed=1,
                                           tool_choice={"type": "function", "function": {"name": "time_in"}})
    call = named.choices[0].message.tool_calls[0]
    assert call.function.name == "time_in" and json.loads(call.function.arguments)["zone"] in ("UTC", "TRT")
    none = client.chat.completions.create(model="demo", messages=MSGS, tools=TOOLS, tool_choice="none",
                                          max_tokens=20, seed=1)
    assert none.choices[0].message.tool_calls is None and none.choices[0].finish_reason in ("stop", "length")
    auto = client.chat.completions.create(model="demo", messages=MSGS, tools=TOOLS, max_tokens=20, seed=1)
    msg = auto.choices[0].message
    assert (msg.tool_calls is None) == (auto.choices[0].finish_reason != "tool_calls")


def test_streamed_tool_call_deltas(client: openai.OpenAI) -> None:
    whole = client.chat.completions.create(model="demo", messages=MSGS, tools=TOOLS, tool_choice="required",
                                           max_tokens=60, seed=4)
    calls: dict[int, dict] = {}
    finish = None
    for c in client.chat.completions.create(model="demo", messages=MSGS, tools=TOOLS, tool_choice="required",
                                            max_tokens=60, seed=4, stream=True):
        for ch in c.choices:
            for tc in ch.delta.tool_calls or []:
                entry = calls.setdefault(tc.index, {"name": "", "arguments": ""})
                entry["name"] += tc.function.name or ""
                entry["arguments"] += tc.function.arguments or ""
            finish = ch.finish_reason or finish
    expected = whole.choices[0].message.tool_calls[0].function
    assert finish == "tool_calls" and calls == {0: {"name": expected.name, "arguments": expected.arguments}}


def test_tool_history_is_accepted(client: openai.OpenAI) -> None:
    history = [*MSGS, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Ankara", "days": 2}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 24C"}]
    r = client.chat.completions.create(model="demo", messages=history, tools=TOOLS, max_tokens=8, seed=1)
    assert r.usage.prompt_tokens > 0 and r.choices[0].finish_reason in ("stop", "length", "tool_calls")


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"tools": "weather"}, "tools"),
        ({"tools": []}, "tools"),
        ({"tools": [{"type": "function", "function": {"name": ""}}]}, "tools"),
        ({"tools": [{"type": "retrieval"}]}, "tools"),
        ({"tools": TOOLS, "tool_choice": "always"}, "tool_choice"),
        ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"functions": [{"name": "f"}]}, "functions"),
        ({"tools": TOOLS, "tool_choice": "required", "response_format": {"type": "json_object"}}, "tool_choice"),
    ],
)
def test_bad_tool_fields_are_400(server: str, extra: dict, param: str) -> None:
    r = httpx.post(server + "/v1/chat/completions", json={"model": "demo", "messages": MSGS, "max_tokens": 3, **extra})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


@pytest.mark.filterwarnings("ignore::UserWarning")  # litellm's own pydantic models warn on import
def test_litellm_sdk_with_tools(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network: its bundled price map
    litellm = pytest.importorskip("litellm")
    r = litellm.completion(model="openai/demo", api_base=server + "/v1", api_key="unused", messages=MSGS,
                           tools=TOOLS, tool_choice="required", max_tokens=60, seed=2)
    call = r.choices[0].message.tool_calls[0]
    assert r.choices[0].finish_reason == "tool_calls" and call.function.name in ("weather", "time_in")
    json.loads(call.function.arguments)


def test_tool_calls_stream_incrementally_and_accumulate_to_the_full_response(client: openai.OpenAI) -> None:
    """OpenAI's streamed shape: the first delta of a call has index, id, type, name and empty
    arguments; argument fragments follow; the SDK's accumulation equals the non-streamed calls."""
    for seed, choice in ((5, "required"), (6, {"type": "function", "function": {"name": "weather"}})):
        args = dict(model="demo", messages=MSGS, tools=TOOLS, tool_choice=choice, max_tokens=60, seed=seed)
        whole = client.chat.completions.create(**args).choices[0].message.tool_calls
        fragments = 0
        with client.chat.completions.stream(**args) as stream:
            for event in stream:
                if event.type == "chunk":
                    for tc in event.chunk.choices[0].delta.tool_calls or [] if event.chunk.choices else []:
                        if tc.id is not None:
                            assert tc.type == "function" and tc.function.name and tc.function.arguments == ""
                        else:
                            assert tc.function.name is None and tc.function.arguments
                            fragments += 1
            final = stream.get_final_completion()
        got = final.choices[0].message.tool_calls
        assert final.choices[0].finish_reason == "tool_calls" and fragments > 2
        assert [(c.function.name, c.function.arguments) for c in got] == \
            [(c.function.name, c.function.arguments) for c in whole]


BOUNDED = {"type": "object", "properties": {"city": {"enum": ["Istanbul", "Ankara"]},
                                            "days": {"type": "integer", "minimum": 1, "maximum": 7},
                                            "note": {"type": "string", "maxLength": 5}},
           "required": ["city", "days", "note"], "additionalProperties": False}
RANDOM_TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": BOUNDED}},
                {"type": "function", "function": {"name": "noop", "parameters": {
                    "type": "object", "properties": {}, "additionalProperties": False}}}]


@pytest.fixture(scope="module")
def random_client(tiny_model_dir: Path) -> Iterator[openai.OpenAI]:
    """The random-weight tiny model with a 512-token context (the tools section is long)."""
    with engine_server(tiny_model_dir, "--served-model-name", "tiny", "--num-kv-blocks", "160",
                       "--max-model-len", "512") as url:
        with openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120) as c:
            yield c


def test_required_parses_every_time_with_a_random_model(random_client: openai.OpenAI) -> None:
    """A random model never means to call a tool: `required` still yields exactly one call that
    parses and matches its function's schema, in every run (sampled, 12 seeds)."""
    schemas = {"weather": BOUNDED, "noop": RANDOM_TOOLS[1]["function"]["parameters"]}
    for seed in range(12):
        r = random_client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "Weather?"}], tools=RANDOM_TOOLS,
            tool_choice="required", max_tokens=80, seed=seed, temperature=1.0)
        choice = r.choices[0]
        assert choice.finish_reason == "tool_calls", choice.message
        (call,) = choice.message.tool_calls
        jsonschema.validate(json.loads(call.function.arguments), schemas[call.function.name])


def test_a_named_call_cut_by_max_tokens_has_one_shape_streamed_or_not(random_client: openai.OpenAI) -> None:
    """Issue 37: a named call cut by `max_tokens` is `finish_reason: "length"` with the partial
    call in `tool_calls` (what the stream sent), never the JSON wrapper in `content`; LangChain's
    structured output reads the call, streamed or not. Greedy, so both runs make the same tokens."""
    args: dict = dict(model="tiny", messages=[{"role": "user", "content": "Weather?"}], tools=RANDOM_TOOLS,
                      tool_choice={"type": "function", "function": {"name": "weather"}}, temperature=0)
    full = random_client.chat.completions.create(**args, max_tokens=80)
    assert full.choices[0].finish_reason == "tool_calls"
    whole = full.choices[0].message.tool_calls[0].function.arguments
    cut_at = full.usage.completion_tokens - 3  # inside the arguments: the closing braces are later
    cut = random_client.chat.completions.create(**args, max_tokens=cut_at).choices[0]
    assert cut.finish_reason == "length" and cut.message.content is None
    (call,) = cut.message.tool_calls
    assert call.function.name == "weather" and whole.startswith(call.function.arguments)
    assert call.function.arguments != whole
    content, name, arguments, finish = "", "", "", None  # the SDK's stream helper refuses "length"
    for chunk in random_client.chat.completions.create(**args, max_tokens=cut_at, stream=True):
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for tc in delta.tool_calls or []:
            name += tc.function.name or ""
            arguments += tc.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert (finish, content, name, arguments) == ("length", "", "weather", call.function.arguments)
