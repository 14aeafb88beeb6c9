"""Bodies of the admin API (pydantic is fine here: admin calls are rare and off the hot path)."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from backends.openai_wire.request import MAX_TOKENS
from gateway.quota import MAX_AMOUNT, MAX_COST
from scheduler.request import PRIORITY_CLASSES

Residency = Literal["any", "local_only"]


def _priority(v: str | None) -> str | None:
    if v is not None and v not in PRIORITY_CLASSES:
        raise ValueError(f"must be one of {', '.join(PRIORITY_CLASSES)}")
    return v


def _no_nul(v: str) -> str:
    if "\x00" in v:
        raise ValueError("must not contain NUL characters")
    return v


def _base_url(v: str) -> str:
    """What the upstream client can dial: http(s), a host, a valid port, printable ASCII."""
    if any(not (32 < ord(c) < 127) for c in v):
        raise ValueError("must be printable ASCII without spaces")
    try:
        u = urlsplit(v)
        u.port  # noqa: B018 - raises ValueError for a port that is no number or out of range
    except ValueError as exc:
        raise ValueError(f"is not a URL ({exc})") from None
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError("must be an http:// or https:// URL with a host")
    return v


def _credential(v: str) -> str:
    """An upstream key goes into a request header: printable ASCII, no spaces or line breaks."""
    if any(not (32 < ord(c) < 127) for c in v):
        raise ValueError("must be printable ASCII without spaces or line breaks")
    return v


# Every admin string: no NUL (PostgreSQL text cannot hold it; it would be a 500, not a 400).
Text = Annotated[str, AfterValidator(_no_nul)]
BaseUrl = Annotated[str, Field(max_length=500), AfterValidator(_base_url)]  # the column's width
Credential = Annotated[str, Field(min_length=1, max_length=4096), AfterValidator(_credential)]
Amount = Annotated[int, Field(ge=0, le=MAX_AMOUNT)]  # what the quota stores count exactly


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False)


# Tenants naming the same group share cached prefixes (an admin's explicit opt-in).
CACHE_GROUP = r"^[A-Za-z0-9_.:-]{1,100}$"
TENANT_NULLABLE = frozenset({"prefix_cache_group"})  # null in a PATCH clears these


class TenantCreate(_Strict):
    name: Text = Field(min_length=1, max_length=200)
    weight: float = Field(default=1.0, gt=0, le=1000)
    priority_ceiling: str = "standard"
    default_priority: str = "standard"
    data_residency: Residency = "any"
    prefix_cache_group: str | None = Field(default=None, pattern=CACHE_GROUP)
    _check = field_validator("priority_ceiling", "default_priority")(_priority)


class TenantUpdate(_Strict):
    name: Text | None = Field(default=None, min_length=1, max_length=200)
    weight: float | None = Field(default=None, gt=0, le=1000)
    priority_ceiling: str | None = None
    default_priority: str | None = None
    data_residency: Residency | None = None
    disabled: bool | None = None
    prefix_cache_group: str | None = Field(default=None, pattern=CACHE_GROUP)
    _check = field_validator("priority_ceiling", "default_priority")(_priority)


class KeyCreate(_Strict):
    name: Text | None = Field(default=None, max_length=200)
    default_priority: str | None = None
    priority_ceiling: str | None = None
    _check = field_validator("priority_ceiling", "default_priority")(_priority)


class QuotaSet(_Strict):
    """Replaces the whole policy: an omitted or null limit means unlimited."""

    requests_per_minute: Amount | None = None
    tokens_per_minute: Amount | None = None
    max_concurrent: Amount | None = None
    daily_tokens: Amount | None = None
    monthly_tokens: Amount | None = None
    monthly_cost: float | None = Field(default=None, ge=0, le=MAX_COST)  # dollars
    max_tokens_per_request: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    allowed_models: list[Annotated[Text, Field(max_length=200)]] | None = Field(default=None, max_length=1000)


class BackendCreate(_Strict):
    name: Text = Field(min_length=1, max_length=200)
    kind: Literal["openai", "local"] = "openai"
    base_url: BaseUrl
    model: Text | None = Field(default=None, max_length=200)
    api_key: Credential | None = None
    input_cost_per_mtok: float = Field(default=0.0, ge=0, le=1e6)  # dollars per million tokens
    output_cost_per_mtok: float = Field(default=0.0, ge=0, le=1e6)
    # The hardware's price per hour, idle or not (a local engine, a vLLM box): the real cost.
    hourly_cost_usd: float | None = Field(default=None, ge=0, le=1e6)
