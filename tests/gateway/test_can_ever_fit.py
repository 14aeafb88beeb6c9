"""A request larger than some window's whole token limit is a 400 naming that window; the check
reads one precomputed ceiling per principal, so it must agree with every scope and window."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from fairgate.backends.openai_wire.errors import WireError
from fairgate.backends.openai_wire.request import parse_request
from fairgate.gateway.quota import ScopeLimits
from fairgate.gateway.request.admission import check_can_ever_fit
from fairgate.gateway.request.auth import Principal

PARSED = parse_request("chat", {"model": "m", "messages": [{"role": "user", "content": "x"}]})


def _principal(*scopes: ScopeLimits) -> Principal:
    return Principal("k", "fg-k", "t", "t", 1.0, "any", "standard", "batch", list(scopes), None, None, 1)


def _refused(principal: Principal, tokens: int) -> str | None:
    try:
        check_can_ever_fit(principal, PARSED, tokens)
    except WireError as e:
        assert (e.status, e.code, e.param) == (400, "request_too_large", "max_tokens")
        return e.message
    return None


LIMITS = (None, 0, 50, 100, 10**20)  # 10**20: past what a counter holds, so unlimited


@pytest.mark.parametrize(("key", "tenant"), list(itertools.product(
    itertools.product(LIMITS[:4], LIMITS[2:]), itertools.product(LIMITS[1:4], (None, 100)))))
def test_the_ceiling_agrees_with_every_scope_and_window(key: tuple[Any, Any], tenant: tuple[Any, Any]) -> None:
    principal = _principal(ScopeLimits("key:k", tokens_per_minute=key[0], daily_tokens=key[1]),
                           ScopeLimits("tenant:t", monthly_tokens=tenant[0], tokens_per_minute=tenant[1],
                                       requests_per_minute=1, monthly_cost=0.0))
    limits = [v for v in (*key, *tenant) if v is not None and v <= 10**12]
    for tokens in (1, 49, 50, 51, 100, 101, 10**6):
        message = _refused(principal, tokens)
        assert (message is not None) == any(v < tokens for v in limits), (tokens, limits)
        if message is not None:  # it names a window this request is larger than
            named = int(message.split("limit of ")[1].split(";")[0])
            assert named in limits and named < tokens


def test_unlimited_keys_never_refuse_and_the_message_names_the_window() -> None:
    assert _principal(ScopeLimits("key:k"), ScopeLimits("tenant:t", requests_per_minute=5)).token_ceiling() == -1
    assert _refused(_principal(ScopeLimits("key:k")), 10**9) is None
    message = _refused(_principal(ScopeLimits("key:k"), ScopeLimits("tenant:t", daily_tokens=30)), 31)
    assert message is not None and "daily_tokens limit of 30" in message
