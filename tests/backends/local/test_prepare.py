"""The engine server's reading of OpenAI bodies (wire parse + engine step) and the wire's
formatting (real tokenizer, no engine)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fairgate.backends.local.engine.output import RequestOutput, Usage
from fairgate.backends.local.model.tokenizer import Tokenizer
from fairgate.backends.local.serving.prepare import ModelInfo
from fairgate.backends.local.serving.prepare import parse_for_engine as parse_request
from fairgate.backends.openai_wire import WireError as APIError
from fairgate.backends.openai_wire import chunk, full_response, usage_chunk

MAX_LEN = 64


@pytest.fixture(scope="module")
def info(tiny_model_dir: Path) -> ModelInfo:
    return ModelInfo("tiny", MAX_LEN, Tokenizer(tiny_model_dir))


def chat(**kw: Any) -> dict[str, Any]:
    return {"model": "tiny", "messages": [{"role": "user", "content": "Hello"}], **kw}


def completion(**kw: Any) -> dict[str, Any]:
    return {"model": "tiny", "prompt": "Hello world", **kw}


def test_completion_defaults(info: ModelInfo) -> None:
    p = parse_request("completion", completion(), info)
    assert p.prompt_token_ids == info.tokenizer.encode("Hello world")
    assert p.sampling.max_tokens == MAX_LEN - len(p.prompt_token_ids)  # whatever room is left
    assert (p.sampling.temperature, p.sampling.top_p, p.sampling.top_k) == (1.0, 1.0, 0)
    assert not p.stream and not p.include_usage and p.model == "tiny"


def test_completion_all_fields(info: ModelInfo) -> None:
    p = parse_request(
        "completion",
        completion(
            prompt=[5, 6, 7], max_tokens=9, temperature=0, top_p=0.5, top_k=-1, seed=3,
            stop="x", stop_token_ids=[2], ignore_eos=True, user="u1", n=1,
            stream=True, stream_options={"include_usage": True}, logprobs=None,
        ),
        info,
    )
    s = p.sampling
    assert p.prompt_token_ids == [5, 6, 7] and p.stream and p.include_usage
    assert (s.max_tokens, s.temperature, s.top_p, s.top_k, s.seed) == (9, 0.0, 0.5, 0, 3)
    assert s.stop == ["x"] and s.stop_token_ids == [2] and s.ignore_eos and s.greedy


def test_batch_of_one_prompt_is_accepted(info: ModelInfo) -> None:
    assert parse_request("completion", completion(prompt=["Hi"]), info).prompt_token_ids == info.tokenizer.encode("Hi")
    assert parse_request("completion", completion(prompt=[[4, 5]]), info).prompt_token_ids == [4, 5]


def test_chat_uses_the_template_and_max_completion_tokens(info: ModelInfo) -> None:
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    p = parse_request("chat", chat(messages=msgs, max_completion_tokens=5, max_tokens=7), info)
    expected = info.tokenizer.encode_chat([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])
    assert p.prompt_token_ids == expected and p.sampling.max_tokens == 5


@pytest.mark.parametrize(
    ("kind", "body", "status", "code", "param"),
    [
        ("chat", ["not", "an", "object"], 400, None, None),
        ("chat", chat(model="gpt-9"), 404, "model_not_found", "model"),
        ("chat", chat(model=5), 400, None, "model"),
        ("chat", chat(messages=[]), 400, None, "messages"),
        ("chat", chat(messages="hi"), 400, None, "messages"),
        ("chat", chat(messages=[{"content": "no role"}]), 400, None, "messages"),
        ("chat", chat(messages=[{"role": "user", "content": [{"type": "image_url"}]}]), 400, None, "messages"),
        ("chat", chat(messages=[{"role": "wizard", "content": "x"}]), 400, None, "messages"),
        ("chat", chat(n=0), 400, None, "n"),
        ("chat", chat(logprobs=1), 400, None, "logprobs"),  # chat takes a boolean
        ("chat", chat(top_logprobs=2), 400, None, "top_logprobs"),  # without logprobs
        ("chat", chat(tools=[{"type": "function"}]), 400, None, "tools"),
        ("chat", chat(response_format={"type": "json_object"}), 400, None, "response_format"),
        ("chat", chat(max_tokens=0), 400, "invalid_value", "max_tokens"),
        ("chat", chat(max_completion_tokens=-3), 400, "invalid_value", "max_tokens"),
        ("chat", chat(max_tokens="10"), 400, None, "max_tokens"),
        ("chat", chat(max_tokens=1.5), 400, None, "max_tokens"),
        ("chat", chat(max_tokens=True), 400, None, "max_tokens"),
        ("chat", chat(max_tokens=10_000), 400, "context_length_exceeded", "max_tokens"),
        ("chat", chat(temperature="hot"), 400, None, "temperature"),
        ("chat", chat(temperature=3), 400, "invalid_value", "temperature"),
        ("chat", chat(top_p=0), 400, "invalid_value", "top_p"),
        ("chat", chat(top_k=-2), 400, "invalid_value", "top_k"),
        ("chat", chat(stop=["ok", 3]), 400, None, "stop"),
        ("chat", chat(stop=""), 400, None, "stop"),
        ("chat", chat(stop_token_ids=[-1]), 400, None, "stop_token_ids"),
        ("chat", chat(stream="yes"), 400, None, "stream"),
        ("chat", chat(stream_options={"include_usage": True}), 400, None, "stream_options"),
        ("chat", chat(stream=True, stream_options={"include_usage": "y"}), 400, None, "stream_options.include_usage"),
        ("chat", chat(frequency_penalty=2.5), 400, None, "frequency_penalty"),
        ("chat", chat(seed="1"), 400, None, "seed"),
        ("completion", completion(prompt=""), 400, None, "prompt"),
        ("completion", completion(prompt=[]), 400, None, "prompt"),
        ("completion", {"model": "tiny"}, 400, None, "prompt"),
        ("completion", completion(prompt=["a", []]), 400, None, "prompt"),
        ("completion", completion(prompt=[1, "a"]), 400, None, "prompt"),
        ("completion", completion(prompt={"text": "x"}), 400, None, "prompt"),
        ("completion", completion(prompt=list(range(3, 3 + MAX_LEN))), 400, "context_length_exceeded", "prompt"),
        ("completion", completion(prompt="Hello " * 200), 400, "context_length_exceeded", "prompt"),
        ("completion", completion(logprobs=21), 400, None, "logprobs"),
        ("completion", completion(echo="yes"), 400, None, "echo"),
        ("completion", completion(best_of=3), 400, None, "best_of"),
    ],
)
def test_bad_bodies_are_refused(info: ModelInfo, kind, body, status, code, param) -> None:
    with pytest.raises(APIError) as err:
        parse_request(kind, body, info)
    e = err.value
    assert e.status == status and not e.retryable
    if code is not None:
        assert e.code == code
    if param is not None:
        assert e.param == param
    body = e.body()["error"]
    assert set(body) >= {"message", "type", "code"} and body["message"] and body["type"] == "invalid_request_error"


def test_missing_model_means_the_served_one(info: ModelInfo) -> None:
    body = chat()
    del body["model"]
    assert parse_request("chat", body, info).model == "tiny"


def test_formatting() -> None:
    out = RequestOutput("abc", [1, 2], "hi", Usage(5, 2, 4), finish_reason="stop", stop_reason="\n")
    r = full_response("chat", "abc", "tiny", out)
    assert r["id"] == "chatcmpl-abc" and r["object"] == "chat.completion"
    assert r["choices"][0]["message"] == {"role": "assistant", "content": "hi"}
    assert r["choices"][0]["finish_reason"] == "stop"
    assert r["usage"] == {
        "prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7, "prompt_tokens_details": {"cached_tokens": 4}
    }
    r = full_response("completion", "abc", "tiny", out)
    assert r["object"] == "text_completion" and r["choices"][0]["text"] == "hi"
    c = chunk("chat", "abc", "tiny", 1, "", first=True)
    assert c["choices"][0]["delta"] == {"role": "assistant", "content": ""} and c["object"] == "chat.completion.chunk"
    assert chunk("chat", "abc", "tiny", 1, None, "length")["choices"][0] == {
        "index": 0, "delta": {}, "logprobs": None, "finish_reason": "length"
    }
    u = usage_chunk("completion", "abc", "tiny", 1, Usage(5, 2))
    assert u["choices"] == [] and u["usage"]["total_tokens"] == 7


@pytest.mark.parametrize(("kind", "body", "param"), [
    ("chat", chat(length_penalty=1.2), "length_penalty"),  # a vLLM extra this engine does not implement
    ("chat", chat(reasoning_effort="low"), "reasoning_effort"),
    ("chat", chat(prediction={"type": "content", "content": "x"}), "prediction"),
    ("completion", completion(messages=[]), "messages"),
    ("chat", chat(echo=True), "echo"),
    ("chat", chat(store=True), "store"),
    ("chat", chat(service_tier="flex"), "service_tier"),
    ("chat", chat(parallel_tool_calls=False), "parallel_tool_calls"),
])
def test_a_field_this_engine_does_not_honour_is_refused_by_name(info: ModelInfo, kind: str, body: dict[str, Any],
                                                               param: str) -> None:
    with pytest.raises(APIError) as err:
        parse_request(kind, body, info)
    assert err.value.status == 400 and err.value.param == param


def test_bookkeeping_fields_that_change_no_output_are_accepted(info: ModelInfo) -> None:
    body = chat(user="u1", metadata={"team": "a"}, store=False, service_tier="auto", prompt_cache_key="k",
                safety_identifier="s", parallel_tool_calls=True, max_tokens=2)
    assert parse_request("chat", body, info).sampling.max_tokens == 2
