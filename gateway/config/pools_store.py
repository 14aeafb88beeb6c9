"""Backend pools from the database into `PoolBackend`s, kept across registry rebuilds.

A rebuild (any admin change on any replica) must not forget a pool's live state — outstanding
requests, health, ejections — or a drain could never see its replica go idle. So a pool that
exists already is updated in place (`PoolBackend.update`), and only new pools are built.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from fairgate.backends.base import Backend
from fairgate.backends.openai_compat import OpenAICompatBackend
from fairgate.backends.pool import PoolBackend, PoolOptions, ReplicaSpec
from fairgate.backends.pool_prefix import PrefixKeyer, PromptEncoder
from fairgate.backends.vllm import VLLMBackend
from fairgate.gateway.store.pool_tables import PoolReplicaRow, PoolRow

if TYPE_CHECKING:
    from fairgate.gateway.config.state import ConfigState
    from fairgate.gateway.settings import Settings


@dataclass(slots=True)
class PoolConfig:
    """One pool row and its replicas, read in one session."""

    row: PoolRow
    replicas: list[ReplicaSpec] = field(default_factory=list)


def read_pools(s: Session, enabled_only: bool = True) -> list[PoolConfig]:
    q = select(PoolRow).order_by(PoolRow.name)
    if enabled_only:
        q = q.where(PoolRow.enabled.is_(True))
    pools = list(s.scalars(q))
    members: dict[str, list[PoolReplicaRow]] = {}
    for r in s.scalars(select(PoolReplicaRow).order_by(PoolReplicaRow.name)):
        members.setdefault(r.pool_id, []).append(r)
    for p in pools:
        s.expunge(p)
    return [PoolConfig(p, [ReplicaSpec(r.name, r.base_url, r.api_key or p.api_key, r.draining)
                           for r in members.get(p.id, [])]) for p in pools]


def local_replica_urls(s: Session) -> list[str]:
    """Base URLs of every replica of an enabled `local` pool (they all get fairness weights)."""
    q = (select(PoolReplicaRow.base_url).join(PoolRow, PoolRow.id == PoolReplicaRow.pool_id)
         .where(PoolRow.enabled.is_(True), PoolRow.kind == "local"))
    return list(s.scalars(q))


@lru_cache(maxsize=8)
def _tokenizer(folder: str) -> PromptEncoder:
    from fairgate.backends.local.model.tokenizer import Tokenizer

    return Tokenizer(folder)


def options_of(row: PoolRow, settings: Settings | None = None) -> PoolOptions:
    """A pool's options: its row's routing, the gateway's fair-queue settings."""
    options = PoolOptions(policy=row.policy, load_factor=row.load_factor, max_kv_usage=row.max_kv_usage,  # type: ignore[arg-type]
                          load_slack=row.load_slack)
    if settings is not None:
        options.fair_slots, options.fair_reserve = settings.pool_fair_slots, settings.pool_fair_reserve
        options.fair_active_lead = settings.pool_fair_active_lead
    return options


def keyer_of(row: PoolRow) -> PrefixKeyer:
    return PrefixKeyer(_tokenizer(row.tokenizer) if row.tokenizer else None, row.block_size, row.affinity_blocks)


def _factory(state: ConfigState, row: PoolRow):  # type: ignore[no-untyped-def]
    settings = state.settings

    def make(spec: ReplicaSpec) -> Backend:
        cls = VLLMBackend if row.kind == "vllm" else OpenAICompatBackend
        # no retries to the same replica: the pool fails over to the next one instead
        return cls(f"{row.name}/{spec.name}", spec.base_url, state.upstream_pool, model=row.model,
                   api_key=spec.api_key or settings.engine_api_key, is_local=True,
                   timeout_s=settings.upstream_timeout_s, max_retries=0)

    return make


async def load_pools(state: ConfigState, old: dict[str, Backend]) -> dict[str, tuple[PoolBackend, PoolRow]]:
    """Every enabled pool (with its row, for the price), reusing the `PoolBackend` objects of
    `old` where a pool stays."""

    def run() -> list[PoolConfig]:
        with state.sessions() as s:
            return read_pools(s)

    configs = await asyncio.to_thread(run)
    out: dict[str, tuple[PoolBackend, PoolRow]] = {}
    for cfg in configs:
        row = cfg.row
        existing = old.get(row.name)
        keyer = await asyncio.to_thread(keyer_of, row)
        if isinstance(existing, PoolBackend) and existing.kind == row.kind and existing.model == row.model:
            existing.options, existing.keyer = options_of(row, state.settings), keyer
            existing.update(cfg.replicas)
            out[row.name] = existing, row
            continue
        # the fair queue's counters and slots are the fleet's when replicas share Redis (pool_clock)
        ledger = state.pool_clock.ledger(row.name) if state.pool_clock is not None else None
        pool = PoolBackend(row.name, row.kind, cfg.replicas, _factory(state, row), state.http, model=row.model,
                           keyer=keyer, options=options_of(row, state.settings),
                           weight_of=lambda tenant: state.fairness_weights.get(tenant, 1.0), ledger=ledger)
        out[row.name] = pool.start(), row
    return out
