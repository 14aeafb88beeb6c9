"""The gateway refuses, before reserving, a field the chosen backend declares it cannot honour."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from fairgate.backends.base import Capabilities
from fairgate.backends.openai_wire import WireError, parse_request
from fairgate.gateway.request.admission import check_capabilities
from fairgate.gateway.request.routing import RouteDecision


@dataclass(frozen=True)
class Declared:
    """What the check reads of a backend: its name and its declared capabilities."""

    name: str
    capabilities: Capabilities


def decision(**caps: bool) -> RouteDecision:
    return RouteDecision([Declared("plain", Capabilities(**caps))], sensitive=False, reason="test")  # type: ignore[list-item]


MSG = [{"role": "user", "content": "x"}]


@pytest.mark.parametrize(("kind", "body", "caps", "param"), [
    ("chat", {"n": 2}, {"n": False}, "n"),
    ("completion", {"prompt": ["a", "b"]}, {"batched_prompts": False}, "prompt"),
    ("chat", {"tools": [{"type": "function", "function": {"name": "f"}}]}, {"tools": False}, "tools"),
    ("chat", {"response_format": {"type": "json_object"}}, {"response_format": False}, "response_format"),
    ("chat", {"logprobs": True}, {"logprobs": False}, "logprobs"),
])
def test_unsupported_fields_are_refused_by_name(kind, body, caps, param) -> None:
    full = {"model": "m", **({"messages": MSG} if kind == "chat" else {"prompt": "x"}), **body}
    with pytest.raises(WireError) as err:
        check_capabilities(decision(**caps), parse_request(kind, full))
    assert (err.value.status, err.value.code, err.value.param) == (400, "unsupported_parameter", param)
    check_capabilities(decision(), parse_request(kind, full))  # a backend that declares it: passes
