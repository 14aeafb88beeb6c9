"""Backend objects by name, built from the `backends` table plus the embedded engine, and the
router over them. The routing issue replaces `build_router`'s internals; callers stay the same.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import select

from fairgate.backends.base import Backend
from fairgate.backends.http1 import HTTP1Pool
from fairgate.backends.http_transport import Transport
from fairgate.backends.openai_compat import OpenAICompatBackend
from fairgate.backends.vllm import VLLMBackend
from fairgate.gateway.request.routing import Router
from fairgate.gateway.settings import Settings
from fairgate.gateway.store.tables import BackendRow

if TYPE_CHECKING:
    from fairgate.backends.local.serving.backend import LocalBackend
    from fairgate.gateway.config.state import ConfigState

log = logging.getLogger("fairgate.registry")
DEMO_MODEL_DIR = Path(__file__).resolve().parents[2] / "models" / "fairgate-demo"  # the checkout's models/


@dataclass(slots=True)
class Price:
    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok) / 1e6


def embedded_model_dir(settings: Settings) -> str | None:
    if not settings.embedded_engine:
        return None
    if settings.model:
        return settings.model
    return str(DEMO_MODEL_DIR) if (DEMO_MODEL_DIR / "config.json").exists() else None


def start_embedded_engine(settings: Settings) -> LocalBackend | None:
    """The in-process engine on the configured model folder, or None if there is none."""
    folder = embedded_model_dir(settings)
    if folder is None:
        return None
    from fairgate.backends.local.engine.config import EngineConfig
    from fairgate.backends.local.serving.backend import LocalBackend

    name = settings.served_model_name or Path(folder).resolve().name
    limits = tuple(f"{k}={v}" for k, v in settings.request_limits.items())
    backend = LocalBackend.from_config(EngineConfig(model=folder, served_model_name=name, request_limits=limits,
                                                    reasoning_parser=settings.reasoning_parser,
                                                    grammar_timeout_s=settings.grammar_timeout_s,
                                                    cpu_cores=settings.engine_cpu_cores), name=name)
    log.info("embedded engine serving %s as %r", folder, name)
    return backend


def _make_backend(row: BackendRow, pool: HTTP1Pool, settings: Settings, old: Backend | None = None) -> Backend:
    # a "local" backend is a fairgate engine server on company hardware: same protocol,
    # but personal data may go there; it gets the engine key, never the external API's key
    default_key = settings.engine_api_key if row.kind in ("local", "vllm") else settings.upstream_api_key
    cls = VLLMBackend if row.kind == "vllm" else OpenAICompatBackend  # vllm: on our hardware too
    # the same upstream keeps its breaker across rebuilds: an admin change elsewhere must not
    # close a circuit that an outage opened
    transport, kept = transport_of(row), None
    if isinstance(old, OpenAICompatBackend) and (old.base_url, old.transport) == (row.base_url.rstrip("/"), transport):
        kept = old.breaker
    return cls(
        row.name, row.base_url, pool, model=row.model, api_key=row.api_key or default_key,
        is_local=row.kind in ("local", "vllm"), timeout_s=settings.upstream_timeout_s,
        max_retries=settings.upstream_max_retries, transport=transport, breaker=kept)


def transport_of(row: BackendRow) -> Transport:
    """The row's proxy, TLS, header, query and size settings (validated when they were stored)."""
    return Transport.of(proxy_url=row.proxy_url, tls_verify=row.tls_verify, ca_bundle=row.ca_bundle,
                        client_cert=row.client_cert, client_key=row.client_key, extra_headers=row.extra_headers,
                        extra_query=row.extra_query, auth_header=row.auth_header,
                        max_response_bytes=row.max_response_bytes)


async def load_backends(state: ConfigState) -> None:
    """(Re)build `state.backends`, `state.prices` and `state.router` from the database."""

    def rows() -> list[BackendRow]:
        with state.sessions() as s:
            return list(s.scalars(select(BackendRow).where(BackendRow.enabled.is_(True))))

    backends: dict[str, Backend] = {}
    prices: dict[str, Price] = {}
    old = state.backends
    for row in await asyncio.to_thread(rows):
        backends[row.name] = _make_backend(row, state.upstream_pool, state.settings, old.get(row.name))
        prices[row.name] = Price(row.input_cost_per_mtok, row.output_cost_per_mtok)
    from fairgate.gateway.config.pools_store import (
        load_pools,  # pools keep their live state across rebuilds
    )

    for name, (pool, pool_row) in (await load_pools(state, old)).items():
        backends[name] = pool
        prices[name] = Price(pool_row.input_cost_per_mtok, pool_row.output_cost_per_mtok)
    if state.embedded is not None:
        backends.setdefault(state.embedded.name, state.embedded)
        prices.setdefault(state.embedded.name, Price())
    for name, backend in old.items():
        if backend is not state.embedded and backends.get(name) is not backend:
            await backend.aclose()
    state.backends = backends
    state.prices = prices
    state.router = build_router(state)


async def refresh_if_stale(state: ConfigState, version: int | None = None) -> bool:
    """Rebuild backends and push weights when the config version moved (an admin change on any
    replica); the key cache reloads itself through the version check at admission."""
    from fairgate.gateway.config.fairness import push_weights

    current = await state.config.version() if version is None else version
    if current == state.config_version:
        return False
    async with state.config_lock:  # one rebuild for a burst of requests that all noticed
        if current == state.config_version:
            return True
        await load_backends(state)
        await push_weights(state)
        state.config_version = current
    return True


async def watch_config(state: ConfigState, interval_s: float = 1.0) -> None:
    """Background task: notice other replicas' admin changes within `interval_s`."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            await refresh_if_stale(state)
        except Exception as exc:  # Redis or the database blinked: try again next round
            log.warning("config refresh failed (%s)", type(exc).__name__)


def build_router(state: ConfigState) -> Router:
    from fairgate.gateway.config.routing_store import (
        build_router as build_rule_router,  # the routing issue's rules
    )

    return build_rule_router(state)
