"""The gateway's connection to Redis: redis-py's asyncio client, hiredis parsing the replies.

URLs as redis-py reads them: `redis://[[user]:password@]host[:port][/db]`; `rediss://…` is TLS,
verified against the system CAs or the file in `?ssl_ca_certs=/path/ca.pem`
(`?ssl_cert_reqs=none` turns verification off) and never falls back to plaintext;
`unix://[[user]:password@]/path/to/redis.sock[?db=N]`. With `cluster` the URL names one node of
a Redis Cluster: redis-py's cluster client routes each command by its keys (a script by its
KEYS), follows MOVED/ASK and refreshes the slot map. Scripts are redis-py's `register_script`:
EVALSHA, and on NOSCRIPT (a restarted or flushed Redis, a Cluster node that has not seen the
script) SCRIPT LOAD on every primary and EVALSHA again.

Replies are decoded as UTF-8; one that is not (a stray value in a key we read) fails that call
alone. Every call takes its own pooled connection, and a connection whose call failed (a
timeout, an undecodable reply, a refused AUTH) is closed, never handed to the next caller.
Commands are sent once, never retried: a quota script retried after a lost reply could reserve
twice. A failed call raises (redis.exceptions.ConnectionError, TimeoutError, ResponseError,
…) and the gateway answers 503 (fail closed); the next call connects afresh.
tests/gateway/test_redis_client.py pins each of these against real redis-server processes.

This replaced a hand-written RESP client (issue 18): redis-py costs more CPU per command
(bench/upstream_clients.py) but stays within 20% of the gateway's CPU per request
(bench/gateway_overhead.py); the figures are in docs/fleet.md.
"""

from __future__ import annotations

from typing import Any, TypeAlias

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.maint_notifications import MaintNotificationsConfig

RedisClient: TypeAlias = "Redis | RedisCluster"
POOL_SIZE = 64  # connections per replica (per node on a Cluster); `?max_connections=` overrides


def connect(url: str, cluster: bool = False, timeout_s: float = 5.0) -> RedisClient:
    """A client for `url` (module docstring); no connection is opened until its first call,
    on the caller's event loop. `timeout_s` bounds connecting, each reply, and the wait for a
    free pooled connection when all `POOL_SIZE` are busy."""
    options: dict[str, Any] = {
        "decode_responses": True, "socket_timeout": timeout_s, "socket_connect_timeout": timeout_s,
        "retry": Retry(NoBackoff(), 0),
        # Redis Enterprise's maintenance pushes; while on ("auto"), redis-py 8 skips its check
        # that a pooled connection is still open, and a connection the server closed while idle
        # (a restart, a timeout) fails its next call instead of being replaced.
        "maint_notifications_config": MaintNotificationsConfig(enabled=False),
    }
    if cluster:  # its node pools cannot wait for a free connection: room for a burst instead
        return RedisCluster.from_url(url, max_connections=16 * POOL_SIZE, **options)
    # a burst past the pool waits its turn (redis-py's plain pool would refuse it: a 503)
    return Redis.from_pool(BlockingConnectionPool.from_url(url, max_connections=POOL_SIZE, timeout=timeout_s,
                                                           **options))
