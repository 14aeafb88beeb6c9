"""Bodies of the admin API (pydantic is fine here: admin calls are rare and off the hot path)."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from fairgate.backends.http_transport import header_problem
from fairgate.backends.openai_wire.request import MAX_TOKENS
from fairgate.gateway.quota import MAX_AMOUNT, MAX_COST
from fairgate.scheduler.request import PRIORITY_CLASSES

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


def _proxy_url(v: str) -> str:
    if urlsplit(v).scheme != "http":
        raise ValueError("must be an http:// proxy URL (https:// and socks proxies are not supported)")
    return _base_url(v)


def _headers(v: dict[str, str]) -> dict[str, str]:
    for name, value in v.items():
        problem = header_problem(name, value)
        if problem:
            raise ValueError(problem)
    if len({n.lower() for n in v}) != len(v):
        raise ValueError("lists a header twice (names are case-insensitive)")
    return v


def _header_name(v: str) -> str:
    problem = header_problem(v)
    if problem:
        raise ValueError(problem)
    return v


# Every admin string: no NUL (PostgreSQL text cannot hold it; it would be a 500, not a 400).
Text = Annotated[str, AfterValidator(_no_nul)]
BaseUrl = Annotated[str, Field(max_length=500), AfterValidator(_base_url)]  # the column's width
ProxyUrl = Annotated[str, Field(max_length=1000), AfterValidator(_proxy_url)]
FilePath = Annotated[Text, Field(min_length=1, max_length=1000)]  # a PEM file on the gateway's hosts
Headers = Annotated[dict[str, str], Field(max_length=50), AfterValidator(_headers)]
Query = Annotated[dict[Annotated[Text, Field(min_length=1, max_length=200)], Annotated[Text, Field(max_length=2000)]],
                  Field(max_length=50)]
HeaderName = Annotated[str, AfterValidator(_header_name)]
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
    # How the upstream is reached (backends/http_transport.py); None: the default.
    proxy_url: ProxyUrl | None = None  # overrides HTTP(S)_PROXY / NO_PROXY for this backend
    tls_verify: bool = True
    ca_bundle: FilePath | None = None
    client_cert: FilePath | None = None  # mTLS: the certificate (and key, unless client_key)
    client_key: FilePath | None = None
    extra_headers: Headers | None = None  # stored encrypted: values may be credentials
    extra_query: Query | None = None  # added to the base URL's own query on every request
    auth_header: HeaderName | None = None  # e.g. "api-key": the key sent raw under it, no Bearer
    max_response_bytes: int | None = Field(default=None, ge=1024, le=2**34)

    @model_validator(mode="after")
    def _key_needs_cert(self) -> Any:
        if self.client_key and not self.client_cert:
            raise ValueError("client_key needs client_cert")
        return self


# null in a PATCH clears these; other fields ignore null
BACKEND_NULLABLE = frozenset({"model", "api_key", "hourly_cost_usd", "proxy_url", "ca_bundle", "client_cert",
                              "client_key", "extra_headers", "extra_query", "auth_header", "max_response_bytes"})
BACKEND_SECRETS = frozenset({"api_key", "proxy_url", "extra_headers"})


class BackendUpdate(BackendCreate):
    """PATCH /admin/backends/{name}: the fields given change; null clears an optional one."""

    name: Text | None = Field(default=None, min_length=1, max_length=200)  # type: ignore[assignment]
    kind: Literal["openai", "local"] | None = None  # type: ignore[assignment]
    base_url: BaseUrl | None = None  # type: ignore[assignment]
    tls_verify: bool | None = None  # type: ignore[assignment]
    input_cost_per_mtok: float | None = Field(default=None, ge=0, le=1e6)  # type: ignore[assignment]
    output_cost_per_mtok: float | None = Field(default=None, ge=0, le=1e6)  # type: ignore[assignment]
    enabled: bool | None = None

    @model_validator(mode="after")
    def _key_needs_cert(self) -> Any:
        return self  # checked against the stored row, which may hold the certificate


def redact_url(url: str | None) -> str | None:
    """A proxy URL as shown back: its password replaced by `***`."""
    if not url:
        return url
    u = urlsplit(url)
    if u.password is None:
        return url
    return u._replace(netloc=f"{u.username or ''}:***@{u.netloc.rsplit('@', 1)[1]}").geturl()


def backend_audit(fields: dict[str, Any]) -> dict[str, Any]:
    """What an audit row keeps of a backend change: no credential, only header names."""
    out = {k: v for k, v in fields.items() if k not in BACKEND_SECRETS}
    if fields.get("proxy_url") is not None:
        out["proxy_url"] = redact_url(fields["proxy_url"])
    if fields.get("extra_headers") is not None:
        out["extra_headers"] = sorted(fields["extra_headers"])
    return out
