"""Bodies of the admin API (pydantic is fine here: admin calls are rare and off the hot path)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from scheduler.request import PRIORITY_CLASSES

Residency = Literal["any", "local_only"]


def _priority(v: str | None) -> str | None:
    if v is not None and v not in PRIORITY_CLASSES:
        raise ValueError(f"must be one of {', '.join(PRIORITY_CLASSES)}")
    return v


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False)


# Tenants naming the same group share cached prefixes (an admin's explicit opt-in).
CACHE_GROUP = r"^[A-Za-z0-9_.:-]{1,100}$"
TENANT_NULLABLE = frozenset({"prefix_cache_group"})  # null in a PATCH clears these


class TenantCreate(_Strict):
    name: str = Field(min_length=1, max_length=200)
    weight: float = Field(default=1.0, gt=0, le=1000)
    priority_ceiling: str = "standard"
    default_priority: str = "standard"
    data_residency: Residency = "any"
    prefix_cache_group: str | None = Field(default=None, pattern=CACHE_GROUP)
    _check = field_validator("priority_ceiling", "default_priority")(_priority)


class TenantUpdate(_Strict):
    name: str | None = Field(default=None, min_length=1, max_length=200)
    weight: float | None = Field(default=None, gt=0, le=1000)
    priority_ceiling: str | None = None
    default_priority: str | None = None
    data_residency: Residency | None = None
    disabled: bool | None = None
    prefix_cache_group: str | None = Field(default=None, pattern=CACHE_GROUP)
    _check = field_validator("priority_ceiling", "default_priority")(_priority)


class KeyCreate(_Strict):
    name: str | None = Field(default=None, max_length=200)
    default_priority: str | None = None
    priority_ceiling: str | None = None
    _check = field_validator("priority_ceiling", "default_priority")(_priority)


class QuotaSet(_Strict):
    """Replaces the whole policy: an omitted or null limit means unlimited."""

    requests_per_minute: int | None = Field(default=None, ge=0)
    tokens_per_minute: int | None = Field(default=None, ge=0)
    max_concurrent: int | None = Field(default=None, ge=0)
    daily_tokens: int | None = Field(default=None, ge=0)
    monthly_tokens: int | None = Field(default=None, ge=0)
    monthly_cost: float | None = Field(default=None, ge=0)
    max_tokens_per_request: int | None = Field(default=None, ge=1)
    allowed_models: list[str] | None = None


class BackendCreate(_Strict):
    name: str = Field(min_length=1, max_length=200)
    kind: Literal["openai", "local"] = "openai"
    base_url: str = Field(pattern=r"^https?://")
    model: str | None = None
    api_key: str | None = None
    input_cost_per_mtok: float = Field(default=0.0, ge=0)
    output_cost_per_mtok: float = Field(default=0.0, ge=0)
