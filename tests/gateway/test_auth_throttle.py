"""AuthThrottle on a fake clock: the window, Retry-After, per-address counts, the bound."""

from __future__ import annotations

import pytest

from fairgate.backends.openai_wire import WireError
from fairgate.gateway.request import auth_throttle
from fairgate.gateway.request.auth_throttle import AuthThrottle


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_window_and_retry_after() -> None:
    clock = Clock()
    th = AuthThrottle(3, 60.0, clock)
    for _ in range(3):
        th.check("1.2.3.4")
        th.failed("1.2.3.4")
    clock.t += 14.2
    with pytest.raises(WireError) as exc:
        th.check("1.2.3.4")
    assert exc.value.status == 429 and exc.value.headers == {"retry-after": "46"}
    th.check("5.6.7.8")  # another address: its own count
    th.check(None)  # no address known (a unix socket): never throttled
    clock.t += 45.8  # the window that began with the first failure has passed
    th.check("1.2.3.4")
    th.failed("1.2.3.4")
    th.check("1.2.3.4")  # a new window: one failure so far


def test_off_when_zero() -> None:
    th = AuthThrottle(0, 60.0)
    for _ in range(100):
        th.failed("1.2.3.4")
    th.check("1.2.3.4")
    assert th._windows == {}


def test_tracked_addresses_are_bounded(monkeypatch) -> None:
    monkeypatch.setattr(auth_throttle, "MAX_ADDRESSES", 10)
    clock = Clock()
    th = AuthThrottle(1, 60.0, clock)
    for i in range(25):
        th.failed(f"10.0.0.{i}")
    assert len(th._windows) == 10 and "10.0.0.24" in th._windows and "10.0.0.0" not in th._windows
