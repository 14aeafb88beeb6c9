"""Failed-authentication throttle: one client address sending bad keys is slowed, not served.

Every unknown key costs a database query (gateway/request/auth.py caches only what it has seen), so a
client trying keys could both guess and load the database. After `max_failures` failed
authentications from one address within `window_s`, that address gets 429 with Retry-After for
every key the gateway does not already hold in its cache, until the window that started with
its first failure has passed. A key the gateway has already authenticated (cached) keeps working
from that address, so one misconfigured client behind a shared NAT address does not lock out
its neighbours' working keys; a good key the replica has not seen yet waits out the window.

Per replica, in memory: behind N replicas a client gets about N × `max_failures` tries per
window. The address is the one uvicorn reports (the proxy's `X-Forwarded-For` when it comes
from `--forwarded-allow-ips`). The admin token is throttled the same way.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from fairgate.backends.openai_wire import WireError
from fairgate.backends.types import Scope

MAX_ADDRESSES = 100_000  # tracked at once; past it the oldest windows are forgotten first


@dataclass(slots=True)
class _Window:
    start: float
    failures: int


class AuthThrottle:
    """Counts failed authentications per client address in fixed windows. `max_failures` 0: off."""

    def __init__(self, max_failures: int, window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_failures = max_failures
        self.window_s = window_s
        self._clock = clock
        self._windows: dict[str, _Window] = {}

    def check(self, address: str | None) -> None:
        """Raise the 429 when `address` is over its failures in the current window."""
        w = self._live(address)
        if w is None or w.failures < self.max_failures:
            return
        retry = max(1, math.ceil(w.start + self.window_s - self._clock()))
        raise WireError(429, f"Too many failed authentications from this address; retry after {retry} s.",
                        "too_many_auth_failures", headers={"retry-after": str(retry)})

    def failed(self, address: str | None) -> None:
        if not self.max_failures or address is None:
            return
        w = self._live(address)
        if w is None:
            if len(self._windows) >= MAX_ADDRESSES:
                self._evict()
            self._windows[address] = _Window(self._clock(), 1)
        else:
            w.failures += 1

    def _live(self, address: str | None) -> _Window | None:
        if not self.max_failures or address is None:
            return None
        w = self._windows.get(address)
        if w is not None and self._clock() - w.start >= self.window_s:
            del self._windows[address]
            return None
        return w

    def _evict(self) -> None:
        now = self._clock()
        for addr in [a for a, w in self._windows.items() if now - w.start >= self.window_s]:
            del self._windows[addr]
        while len(self._windows) >= MAX_ADDRESSES:  # dicts keep insertion order: oldest first
            del self._windows[next(iter(self._windows))]


def client_address(scope: Scope) -> str | None:
    client = scope.get("client")
    return str(client[0]) if client else None
