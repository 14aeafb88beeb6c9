"""Fixtures for gateway tests: one loopback upstream per module, a gateway per test."""

from __future__ import annotations

import pytest

from tests.gateway.harness import REDIS_URL, gateway_and_admin, pg_database, redis_prefix
from tests.helpers.upstream import UpstreamServer


@pytest.fixture(scope="module")
def upstream():
    with UpstreamServer() as up:
        yield up


@pytest.fixture
def make_gateway(tmp_path, upstream):
    """make_gateway(db="sqlite"|"postgres", redis=False|True, **settings) → (gateway, admin),
    with backend "up" (the loopback upstream) registered."""
    stack = []

    def make(db: str = "sqlite", redis: bool = False, **overrides):
        import contextlib

        es = contextlib.ExitStack()
        stack.append(es)
        url = es.enter_context(pg_database()) if db == "postgres" else f"sqlite:///{tmp_path}/gw-{len(stack)}.db"
        extra = {"redis_url": REDIS_URL, "redis_prefix": es.enter_context(redis_prefix())} if redis else {}
        gw, admin = es.enter_context(gateway_and_admin(url, embedded_engine=False, **extra, **overrides))
        admin.backend("up", upstream.base_url, model="up-model")
        return gw, admin

    yield make
    for es in reversed(stack):
        es.close()
