"""The cluster's configuration version: every admin change bumps it, every replica watches it.

A replica that sees the version move reloads its key cache, backends, router and fairness
weights (gateway.config.registry). The quota store checks a principal's version inside the same
atomic step that reserves quota, so both read one counter: `RedisConfigBus` shares the quota
store's Redis connection and key; `MemoryConfigBus` is the single-process counter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from fairgate.gateway.quota.cluster import ClusterClient
    from fairgate.gateway.quota.resp import RespClient


class ConfigBus(Protocol):
    async def version(self) -> int:
        """The current config version (0 before any change)."""
        ...

    async def bump(self) -> int:
        """Announce a change; returns the new version."""
        ...


class MemoryConfigBus:
    """One process: a plain counter (read synchronously by the in-process quota store)."""

    def __init__(self) -> None:
        self.current = 0

    async def version(self) -> int:
        return self.current

    async def bump(self) -> int:
        self.current += 1
        return self.current


class RedisConfigBus:
    """All replicas: one Redis counter, `<prefix>:ver` (the reserve script reads it too)."""

    def __init__(self, redis: RespClient | ClusterClient, prefix: str) -> None:
        self._redis = redis
        self.key = f"{prefix}:ver"

    async def version(self) -> int:
        return int(await self._redis.execute("GET", self.key) or 0)

    async def bump(self) -> int:
        return int(await self._redis.execute("INCR", self.key))
