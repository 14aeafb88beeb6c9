"""The quota scripts on a Redis Cluster: redis-py's cluster client behind RespClient's `execute`.

redis-py routes each command by its first key (EVALSHA by its KEYS), follows MOVED/ASK and
refreshes the slot map; the quota store keeps every script's keys in one slot with a hash tag
(gateway.quota.redis_store). Error replies come back as `RespError` with Redis' own text, so
`Script` loads a script on NOSCRIPT exactly as on a single Redis.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError, ResponseError

from fairgate.gateway.quota.resp import RespError


class ClusterClient:
    def __init__(self, url: str, timeout_s: float = 5.0) -> None:
        self._url = url
        self._timeout = timeout_s
        self._client: RedisCluster | None = None

    def _cluster(self) -> RedisCluster:
        if self._client is None:  # made on first use, on the caller's event loop
            self._client = RedisCluster.from_url(self._url, decode_responses=True,
                                                 socket_timeout=self._timeout, socket_connect_timeout=self._timeout)
        return self._client

    async def execute(self, *args: Any) -> Any:
        try:
            return await self._cluster().execute_command(*args)
        except NoScriptError as exc:
            raise RespError(f"NOSCRIPT {exc}") from None
        except ResponseError as exc:
            raise RespError(str(exc)) from None

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
