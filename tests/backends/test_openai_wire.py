"""The shared OpenAI wire layer: parsing, the body reader, errors, the context rule, SSE."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from fairgate.backends.openai_wire import (
    SSE_DONE,
    TEMPLATE_TOKENS_BASE,
    TEMPLATE_TOKENS_PER_MESSAGE,
    WireError,
    check_completion_fits,
    check_prompt_fits,
    chunk_text_count,
    error_body,
    parse_request,
    read_json_object,
    sse,
    sse_stream_error,
)
from fairgate.backends.openai_wire.responses import random_request_id
from fairgate.backends.types import Message, Receive


def test_chat_fields_and_prompt_bound() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:x"}}
    body = {"model": "m", "messages": [{"role": "system", "content": "çay"},
                                       {"role": "user", "content": [{"type": "text", "text": "hi"}, image]}],
            "max_completion_tokens": 7, "max_tokens": 9, "stream": True,
            "stream_options": {"include_usage": True}, "temperature": 0, "top_k": 3, "seed": 1, "stop": "x"}
    p = parse_request("chat", body)
    assert (p.model, p.stream, p.include_usage, p.has_stream_options) == ("m", True, True, True)
    assert (p.max_tokens, p.max_tokens_field) == (7, "max_completion_tokens")
    assert p.texts == ["çay", "hi"] and p.messages is body["messages"]
    assert (p.temperature, p.top_p, p.top_k, p.seed, p.stop) == (0.0, None, 3, 1, ["x"])
    # "çay" is 4 UTF-8 bytes, "hi" 2; the image part counts its JSON bytes
    assert p.prompt_tokens_bound == (TEMPLATE_TOKENS_BASE + 2 * TEMPLATE_TOKENS_PER_MESSAGE + 4 + 2
                                     + len(orjson.dumps(image)))


def test_completion_prompts() -> None:
    assert parse_request("completion", {"model": "m", "prompt": ["hello"]}).prompt == "hello"
    ids = parse_request("completion", {"model": "m", "prompt": [[4, 5, 6]]})
    assert ids.prompt == [4, 5, 6] and ids.texts == [] and ids.prompt_tokens_bound == TEMPLATE_TOKENS_BASE + 3
    assert parse_request("completion", {"prompt": "x"}, require_model=False).model is None
    batch = parse_request("completion", {"model": "m", "prompt": ["ab", [7, 8]], "n": 3})
    assert batch.prompts == ["ab", [7, 8]] and batch.num_choices == 6 and batch.texts == ["ab"]
    assert batch.prompt_tokens_bound == 2 * TEMPLATE_TOKENS_BASE + 2 + 2


@pytest.mark.parametrize(("kind", "body", "param"), [
    ("chat", {"messages": [{"role": "user", "content": "x"}]}, "model"),
    ("chat", {"model": "m", "messages": []}, "messages"),
    ("chat", {"model": "m", "messages": [{"role": "user", "content": 5}]}, "messages"),
    ("chat", {"model": "m", "messages": [{"role": "user", "content": [{"text": "no type"}]}]}, "messages"),
    ("completion", {"model": "m"}, "prompt"),
    ("completion", {"model": "m", "prompt": ["a", 5]}, "prompt"),
    ("completion", {"model": "m", "prompt": "x", "max_tokens": 0}, "max_tokens"),
    ("completion", {"model": "m", "prompt": "x", "max_completion_tokens": "5"}, "max_tokens"),
    ("completion", {"model": "m", "prompt": "x", "n": 0}, "n"),
    ("completion", {"model": "m", "prompt": "x", "n": "2"}, "n"),
    ("completion", {"model": "m", "prompt": ["x"] * 65, "n": 2}, "n"),
    ("completion", {"model": "m", "prompt": "x", "stream": "yes"}, "stream"),
    ("completion", {"model": "m", "prompt": "x", "stream_options": []}, "stream_options"),
    ("completion", {"model": "m", "prompt": "x", "top_p": True}, "top_p"),
    ("completion", {"model": "m", "prompt": "x", "seed": 1.5}, "seed"),
    ("completion", {"model": "m", "prompt": "x", "stop": [1]}, "stop"),
])
def test_bad_fields_are_named(kind: Any, body: dict[str, Any], param: str) -> None:
    with pytest.raises(WireError) as err:
        parse_request(kind, body)
    e = err.value
    assert (e.status, e.code, e.param, e.retryable) == (400, "invalid_value", param, False)
    assert e.body() == {"error": {"message": e.message, "type": "invalid_request_error",
                                  "code": "invalid_value", "param": param}}


@pytest.mark.parametrize(("param", "bad"), [
    ("temperature", "hot"), ("temperature", 2.5), ("top_p", 0), ("frequency_penalty", float("inf")),
    ("presence_penalty", "1"), ("top_k", -2), ("top_k", 1.5), ("logprobs", "yes"),
    ("top_logprobs", 2.0), ("seed", True), ("reasoning_effort", "max"), ("service_tier", "gold"),
])
def test_every_typed_field_is_checked_alone(param: str, bad: Any) -> None:
    """Each typed field, sent as the body's only optional field, is still checked (the check
    skips only bodies that send none of them)."""
    with pytest.raises(WireError) as err:
        parse_request("chat", {"model": "m", "messages": [{"role": "user", "content": "x"}], param: bad})
    assert (err.value.status, err.value.param) == (400, param)


def test_unknown_fields_pass_and_logprobs_may_be_a_boolean() -> None:
    p = parse_request("chat", {"model": "m", "messages": [{"role": "user"}], "logprobs": True, "tools": []})
    assert p.texts == [] and p.max_tokens is None and p.max_tokens_field == "max_tokens"


def test_error_types_follow_the_status() -> None:
    assert error_body(401, "no")["error"]["type"] == "authentication_error"
    assert error_body(429, "slow")["error"]["type"] == "rate_limit_error"
    assert error_body(404, "where")["error"]["type"] == "invalid_request_error"
    e = WireError(503, "down", "x", headers={"retry-after": "1"})
    assert e.type == "server_error" and e.retryable and e.headers == {"retry-after": "1"}
    assert not WireError(503, "down", retryable=False).retryable


def test_context_rule() -> None:
    check_prompt_fits(63, 64)
    with pytest.raises(WireError) as err:
        check_prompt_fits(64, 64, "messages")
    assert (err.value.code, err.value.param) == ("context_length_exceeded", "messages")
    check_completion_fits(60, 4, 64)
    with pytest.raises(WireError) as err:
        check_completion_fits(60, 5, 64)
    assert (err.value.code, err.value.param) == ("context_length_exceeded", "max_tokens")
    assert "65 tokens (60 in the prompt, 5 for the completion)" in err.value.message


def receiver(*parts: bytes) -> Receive:
    """An ASGI receive over fixed body parts, then a disconnect."""
    messages = [{"type": "http.request", "body": p, "more_body": i < len(parts) - 1} for i, p in enumerate(parts)]

    async def receive() -> Message:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    return receive


async def test_body_reader() -> None:
    assert await read_json_object(receiver(b'{"a":', b" 1}"), {}, 100) == {"a": 1}
    cases = [((b"x" * 60, b"x" * 60), {}, "request_too_large", 413),
             ((b"{}",), {b"content-length": b"101"}, "request_too_large", 413),
             ((b'{"a": "\xff"}',), {}, "invalid_encoding", 400),
             ((b"{nope",), {}, "invalid_json", 400),
             ((b"[1]",), {}, "invalid_json", 400)]
    for parts, headers, code, status in cases:
        with pytest.raises(WireError) as err:
            await read_json_object(receiver(*parts), headers, 100)
        assert (err.value.status, err.value.code) == (status, code)
    with pytest.raises(WireError) as err:
        await read_json_object(receiver(b"x" * 200), {}, 100, too_large_code="body_too_large")
    assert err.value.code == "body_too_large"


def test_sse_framing_and_text_count() -> None:
    c = {"choices": [{"index": 0, "delta": {"content": "a"}}]}
    assert sse(c) == b'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'
    assert chunk_text_count(c, "chat") == 1 and chunk_text_count({"choices": []}, "chat") == 0
    assert chunk_text_count({"choices": [{"text": ""}]}, "completion") == 0
    end = sse_stream_error("broke")
    assert end.endswith(SSE_DONE) and orjson.loads(end[6:-len(SSE_DONE) - 2])["error"]["code"] == "upstream_error"


def test_repr_never_shows_the_prompt() -> None:
    p = parse_request("chat", {"model": "m", "messages": [{"role": "user", "content": "TCKN 10000000146"}],
                               "stop": ["secret-stop"]})
    assert "10000000146" not in repr(p) and "secret-stop" not in repr(p) and "model='m'" in repr(p)


def test_well_formed_new_fields_pass() -> None:
    """The fields issue 14 added, at the edges of their ranges, are read without complaint."""
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "logprobs": True, "top_logprobs": 20,
            "presence_penalty": -2, "frequency_penalty": 2.0, "repetition_penalty": 1.3, "min_p": 1, "min_tokens": 0,
            "stop_token_ids": [0, 7], "logit_bias": {"0": -100, "12": 100.0}, "tools": [tool],
            "tool_choice": {"type": "function", "function": {"name": "f"}},
            "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "object"}}},
            "guided_json": '{"type": "object"}', "guided_regex": "a+", "guided_choice": ["x"],
            "structured_outputs": {"choice": ["x"]}}
    assert parse_request("chat", chat).model == "m"
    for choice in ("none", "auto", "required"):
        parse_request("chat", {**chat, "tool_choice": choice})
    parse_request("chat", {**chat, "tools": None, "tool_choice": "none"})
    completion = {"model": "m", "prompt": [[1, 2], [3]], "logprobs": 0, "echo": True}
    assert parse_request("completion", completion).num_choices == 2
    parse_request("completion", {**completion, "logprobs": 20, "echo": False})


def test_the_field_checks_skip_only_bodies_without_a_field_they_read() -> None:
    """check_fields returns at once for a body holding none of `_CHECKED`: every field its checks
    read (found in their source) must be in that set, or a bad value would pass unchecked."""
    import inspect
    import re

    from fairgate.backends.openai_wire import fields, grammar_bounds

    source = inspect.getsource(fields) + inspect.getsource(grammar_bounds)
    read = set(re.findall(r'body\.get\("(\w+)"', source)) | set(re.findall(r'_number\(body, "(\w+)"\)', source))
    read |= {name for name in re.findall(r'\("(\w+)", -?[0-9.]+, [0-9.]+\)', source)}  # the ranged numbers
    assert read and read <= fields._CHECKED, read - fields._CHECKED


def test_request_ids_are_random_hex_of_a_uuid4s_length() -> None:
    ids = {random_request_id() for _ in range(2000)}
    assert len(ids) == 2000 and all(len(i) == 32 and set(i) <= set("0123456789abcdef") for i in ids)
    assert len({i[:4] for i in ids}) > 1000  # random from the first digit, not a counter behind a prefix

