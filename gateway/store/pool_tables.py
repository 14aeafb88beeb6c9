"""Tables of backend pools, on the gateway's one declarative `Base`.

`backend_pools`: a pool of replicas serving one model under one backend name (routing rules
and clients name it like any backend), with its routing policy and price.
`pool_replicas`: its members; `draining` stops new requests to one (fleet-wide, through the
config version), then the admin removes it once in-flight requests finished.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, DateTime, Float, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from fairgate.gateway.store.secret_box import SecretText
from fairgate.gateway.store.tables import Base, new_id, utcnow


class PoolRow(Base):
    """A pool. `api_key` (the replicas' engine key unless a replica has its own) is a credential."""

    __tablename__ = "backend_pools"
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    kind: Mapped[str] = mapped_column(String(32), default="local")  # local | vllm
    model: Mapped[str | None] = mapped_column(String(200), nullable=True)  # the replicas' model name
    api_key: Mapped[str | None] = mapped_column(SecretText, nullable=True)  # encrypted at rest
    tokenizer: Mapped[str | None] = mapped_column(String(500), nullable=True)  # model folder for prefix keys
    policy: Mapped[str] = mapped_column(String(32), default="affinity")
    load_factor: Mapped[float] = mapped_column(Float, default=1.25)
    max_kv_usage: Mapped[float] = mapped_column(Float, default=0.9)
    load_slack: Mapped[int] = mapped_column(Integer, default=4)
    block_size: Mapped[int] = mapped_column(Integer, default=16)
    affinity_blocks: Mapped[int] = mapped_column(Integer, default=4)
    input_cost_per_mtok: Mapped[float] = mapped_column(Float, default=0.0)
    output_cost_per_mtok: Mapped[float] = mapped_column(Float, default=0.0)
    hourly_cost_usd: Mapped[float | None] = mapped_column(Float, nullable=True)  # the replicas' hardware, all
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class PoolReplicaRow(Base):
    __tablename__ = "pool_replicas"
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    pool_id: Mapped[str] = mapped_column(ForeignKey("backend_pools.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    base_url: Mapped[str] = mapped_column(String(500))
    api_key: Mapped[str | None] = mapped_column(SecretText, nullable=True)  # encrypted at rest
    draining: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)

    __table_args__ = (UniqueConstraint("pool_id", "name", name="uq_pool_replica_name"),)
