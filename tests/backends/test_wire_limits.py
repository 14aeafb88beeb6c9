"""Bounded work per request: each limit of backends/openai_wire/limits.py is a 400 naming the
field past it, and an operator can move it."""

from __future__ import annotations

from typing import Any

import pytest

from fairgate.backends.openai_wire import (
    WireError,
    WireLimits,
    parse_json_object,
    parse_limit_overrides,
    parse_request,
)
from fairgate.backends.openai_wire.embeddings import parse_embeddings

MSG = [{"role": "user", "content": "hi"}]


def chat(**kw: Any) -> dict[str, Any]:
    return {"model": "m", "messages": MSG, **kw}


def tool(i: int, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "function", "function": {"name": f"f{i}", "parameters": params or {"type": "object"}}}


def props(n: int) -> dict[str, Any]:
    return {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(n)}}


CASES = [
    ("chat", chat(n=129), "n"),
    ("completion", {"model": "m", "prompt": ["a"] * 129}, "prompt"),
    ("completion", {"model": "m", "prompt": ["a"] * 10, "n": 13}, "n"),
    ("completion", {"model": "m", "prompt": "a", "best_of": 21}, "best_of"),
    ("chat", chat(logit_bias={str(i): 1 for i in range(301)}), "logit_bias"),
    ("chat", chat(tools=[tool(i) for i in range(129)]), "tools"),
    ("chat", chat(n=128, logprobs=True, top_logprobs=20), "top_logprobs"),
    ("completion", {"model": "m", "prompt": "a", "n": 16, "logprobs": 20}, "logprobs"),
    ("chat", chat(guided_choice=[f"c{i}" for i in range(80_000)]), "guided_choice"),
    ("chat", chat(guided_choice=["x" * 70_000] * 4), "guided_choice"),
    ("chat", chat(guided_regex="a" * 5000), "guided_regex"),
    ("chat", chat(guided_json=props(5000)), "guided_json"),
    ("chat", chat(guided_json=__import__("json").dumps(props(2000))), "guided_json"),
    ("chat", chat(response_format={"type": "json_schema", "json_schema": {"name": "s", "schema": props(5000)}}),
     "response_format"),
    ("chat", chat(structured_outputs={"choice": [str(i) for i in range(5000)]}), "structured_outputs"),
    ("chat", chat(tools=[tool(i, props(100)) for i in range(3)]), "tools"),
]


@pytest.mark.parametrize(("kind", "body", "param"), CASES, ids=[c[2] + str(i) for i, c in enumerate(CASES)])
def test_each_limit_is_a_400_naming_the_field(kind: Any, body: dict[str, Any], param: str) -> None:
    with pytest.raises(WireError) as err:
        parse_request(kind, body)
    assert err.value.status == 400 and err.value.param == param and err.value.type == "invalid_request_error"


def test_requests_within_the_limits_pass() -> None:
    parse_request("chat", chat(n=128))
    parse_request("chat", chat(n=12, logprobs=True, top_logprobs=20))
    parse_request("chat", chat(logit_bias={str(i): 1 for i in range(300)}, tools=[tool(i) for i in range(128)]))
    parse_request("chat", chat(guided_choice=[f"c{i}" for i in range(4096)]))
    parse_request("chat", chat(response_format={"type": "json_schema", "json_schema": {"schema": props(256)}}))
    parse_request("completion", {"model": "m", "prompt": "a", "best_of": 20})


def test_embeddings_inputs_are_bounded() -> None:
    with pytest.raises(WireError) as err:
        parse_embeddings({"model": "m", "input": ["a"] * 2049})
    assert err.value.param == "input"
    parse_embeddings({"model": "m", "input": ["a"] * 2048})
    small = WireLimits(max_embedding_inputs=4)
    with pytest.raises(WireError):
        parse_embeddings({"model": "m", "input": ["a"] * 5}, limits=small)


def test_limits_are_configurable_by_name() -> None:
    limits = parse_limit_overrides(["max_n=4", "max_guided_choices=2"], WireLimits())
    assert (limits.max_n, limits.max_guided_choices, limits.max_tools) == (4, 2, 128)
    with pytest.raises(WireError) as err:
        parse_request("chat", chat(n=5), limits=limits)
    assert err.value.param == "n"
    with pytest.raises(WireError) as err:
        parse_request("chat", chat(guided_choice=["a", "b", "c"]), limits=limits)
    assert err.value.param == "guided_choice"
    assert parse_limit_overrides({"max_n": 8}, WireLimits()).max_n == 8
    for bad in (["max_nn=4"], ["max_n=0"], ["max_n"]):
        with pytest.raises(ValueError):
            parse_limit_overrides(bad, WireLimits())


def test_a_body_nested_too_deep_is_a_400_naming_the_field() -> None:
    deep = "{}"
    for _ in range(900):
        deep = '{"a": ' + deep + "}"
    with pytest.raises(WireError) as err:
        parse_json_object(b'{"model": "m", "metadata": ' + deep.encode() + b"}")
    assert err.value.status == 400 and err.value.param == "metadata"
    ok = '{"a": ' * 40 + "1" + "}" * 40
    assert parse_json_object(b'{"x": ' + ok.encode() + b', "ids": [' + b"[1]," * 200 + b"[2]]}")["x"]["a"]
