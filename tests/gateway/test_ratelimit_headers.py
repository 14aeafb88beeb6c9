"""OpenAI's `x-ratelimit-*` headers from the tenant's quota state: both stores report the same
windows (tightest scope wins), and the gateway sends them on success, streamed or not, and on
429s, with the in-process store and with Redis."""

from __future__ import annotations

import httpx
import pytest

from fairgate.gateway.quota import QuotaDenied, RateLimitState, ScopeLimits, WindowState, duration
from tests.gateway.test_quota_contract import rid, store  # noqa: F401 - the two-store fixture


def test_duration_reads_like_openai() -> None:
    assert [duration(ms) for ms in (0, 17, 1000, 1500, 59_999, 60_000, 360_000, 3_723_000)] == [
        "0s", "17ms", "1s", "1.5s", "59.999s", "1m0s", "6m0s", "1h2m3s"]


async def test_windows_after_each_admission(store) -> None:  # noqa: F811
    lims = [ScopeLimits("t:a", requests_per_minute=5, tokens_per_minute=1000),
            ScopeLimits("k:b", requests_per_minute=3)]  # the key's request window is tighter
    first = await store.reserve(rid(), lims, 100, 0.0, 0)
    assert first.requests is not None and first.tokens is not None
    assert (first.requests.limit, first.requests.remaining) == (3, 2)  # the key's window
    assert (first.tokens.limit, first.tokens.remaining) == (1000, 900)
    assert 59_000 <= first.requests.reset_ms <= 60_000 and 59_000 <= first.tokens.reset_ms <= 60_000
    r2 = rid()
    second = await store.reserve(r2, lims, 250, 0.0, 0)
    assert second.requests == WindowState(3, 1, second.requests.reset_ms)
    assert second.tokens is not None and second.tokens.remaining == 650
    await store.settle(r2, 50, 0.0)  # what was used replaces the reservation in the window
    third = await store.reserve(rid(), lims, 100, 0.0, 0)
    assert third.tokens is not None and third.tokens.remaining == 1000 - 100 - 50 - 100
    with pytest.raises(QuotaDenied) as e:
        await store.reserve(rid(), lims, 10, 0.0, 0)
    state = e.value.state
    assert state.requests is not None and (state.requests.limit, state.requests.remaining) == (3, 0)
    assert state.tokens is not None and state.tokens.remaining == 750  # nothing reserved by the refusal
    assert 0 < state.requests.reset_ms <= 60_000


async def test_refused_before_a_new_scope_was_seen(store) -> None:  # noqa: F811
    await store.reserve(rid(), [ScopeLimits("t:a", requests_per_minute=1)], 10, 0.0, 0)
    with pytest.raises(QuotaDenied) as e:
        await store.reserve(rid(), [ScopeLimits("t:a", requests_per_minute=1),
                                    ScopeLimits("k:new", requests_per_minute=5, tokens_per_minute=50)], 10, 0.0, 0)
    assert e.value.state.requests == WindowState(1, 0, e.value.state.requests.reset_ms)
    assert e.value.state.tokens == WindowState(50, 50, 0)  # the key's window: untouched, empty


async def test_no_window_no_header(store) -> None:  # noqa: F811
    state = await store.reserve(rid(), [ScopeLimits("t:a", daily_tokens=100)], 10, 0.0, 0)
    assert state == RateLimitState() and state.headers() == []


def seconds(text: str) -> float:
    """Parse what `duration` writes."""
    if text.endswith("ms"):
        return int(text[:-2]) / 1000
    minutes, _, rest = text.rpartition("m")
    return (int(minutes) * 60 if minutes else 0) + float(rest[:-1])


def chat(gw, key: str, stream: bool = False) -> httpx.Response:
    body = {"model": "up", "messages": [{"role": "user", "content": "one two three"}], "max_tokens": 5,
            "stream": stream}
    with httpx.stream("POST", gw.url + "/v1/chat/completions", json=body, timeout=30,
                      headers={"authorization": f"Bearer {key}"}) as r:
        r.read()
        return r


@pytest.mark.parametrize("redis", [False, True])
def test_gateway_sends_the_headers(make_gateway, redis):
    gw, admin = make_gateway(redis=redis)
    t = admin.tenant()
    key = admin.key(t["id"])["key"]
    admin.quota(t["id"], requests_per_minute=3, tokens_per_minute=100)
    plain, streamed = chat(gw, key), chat(gw, key, stream=True)
    assert plain.status_code == streamed.status_code == 200
    for r, left in ((plain, 2), (streamed, 1)):
        h = r.headers
        assert h["x-ratelimit-limit-requests"] == "3" and h["x-ratelimit-remaining-requests"] == str(left)
        assert h["x-ratelimit-limit-tokens"] == "100"
        # just admitted: the window is empty again one minute after this request
        assert 55 <= seconds(h["x-ratelimit-reset-requests"]) <= 60
        assert 55 <= seconds(h["x-ratelimit-reset-tokens"]) <= 60
    # the gateway reserved prompt bound + max_tokens, then settled to the backend's usage
    reserved = 100 - int(plain.headers["x-ratelimit-remaining-tokens"])
    assert 5 < reserved < 100
    assert int(streamed.headers["x-ratelimit-remaining-tokens"]) < int(plain.headers["x-ratelimit-remaining-tokens"])
    assert chat(gw, key).status_code == 200
    refused = chat(gw, key)
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "requests_per_minute"
    h = refused.headers
    assert h["x-ratelimit-remaining-requests"] == "0" and h["x-ratelimit-limit-requests"] == "3"
    assert "x-ratelimit-remaining-tokens" in h and int(h["retry-after"]) >= 1
    assert 0 < seconds(h["x-ratelimit-reset-requests"]) <= 60


def test_no_limits_no_headers(make_gateway):
    gw, admin = make_gateway()
    t = admin.tenant()
    r = chat(gw, admin.key(t["id"])["key"])
    assert r.status_code == 200 and not [k for k in r.headers if k.startswith("x-ratelimit")]
