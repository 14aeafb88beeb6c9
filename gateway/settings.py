"""Gateway settings: environment (FAIRGATE_*) over an optional YAML/JSON file over defaults.

With nothing set the gateway runs the embedded default: a SQLite file, the in-process quota
store and an in-process engine on the model folder from FAIRGATE_MODEL (or models/fairgate-demo).
"""

from __future__ import annotations

import json
import os
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from fairgate.backends.collector import parse_threshold
from fairgate.backends.openai_wire.headers import HeaderLimits
from fairgate.backends.openai_wire.limits import WireLimits, parse_limit_overrides

ENV_PREFIX = "FAIRGATE_"
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    admin_token: str | None = None  # unset → admin API refuses every call
    database_url: str = "sqlite:///fairgate.db"
    redis_url: str | None = None  # unset → in-process quota store (single process only)
    redis_prefix: str = "fairgate"
    redis_cluster: bool = False  # redis_url names one node of a Redis Cluster
    # Usage rows get a complexity score and prompt-head hashes for `fairgate advise` (about
    # 0.1 ms of CPU per request, after the answer went out); False: those columns stay NULL.
    advice_signals: bool = True
    # A tenant's fleet-wide cap on a pool: at most this share of its capacity (replicas x
    # pool_replica_slots) in flight across all gateway replicas (gateway.request.pool_share); None: off.
    tenant_pool_share: float | None = Field(default=None, gt=0, le=1)
    pool_replica_slots: int = Field(default=64, ge=1, le=100_000)
    # The gateway-side fair queue of pools (backends/pool_gate.py), for engines without one of their own
    # (vLLM): at most this many requests out per replica, the rest wait in weighted-VTC order; None: off.
    # With redis_url the slots and the tenants' counters are the fleet's (gateway/request/pool_clock.py).
    pool_fair_slots: int | None = Field(default=None, ge=1, le=100_000)
    # Of a pool's free slots under the fair queue, the last this many go only to a tenant below its
    # weighted share (in this gateway's queue, or the fleet's in Redis): a light tenant's request goes
    # out at once instead of waiting for one of a flood's to end.
    pool_fair_reserve: int = Field(default=0, ge=0, le=100_000)
    # A tenant served within the last second keeps up to this many tokens (over its weight) of its lead
    # when its next request waits at a pool's fair queue, instead of starting level with a flood's
    # backlog (backends/pool_gate.py; the engines' --fairness-active-lead); 0: VTC's level lift.
    pool_fair_active_lead: float = Field(default=1024.0, ge=0, le=1e9)
    model: str | None = None  # model folder of the embedded engine
    served_model_name: str | None = None  # default: the model folder's name
    reasoning_parser: Literal["qwen3", "deepseek_r1", "gpt_oss"] | None = None  # the embedded engine's (fairgate engine --reasoning-parser)
    embedded_engine: bool = True  # False: serve only registered backends
    engine_cpu_cores: str | None = None  # the embedded engine's compute cores (fairgate engine --cpu-cores)
    embedded_hourly_cost_usd: float | None = Field(default=None, ge=0)  # the embedded engine's hardware
    host: str = "127.0.0.1"
    port: int = 8000
    max_body_bytes: int = 1_048_576
    default_max_tokens: int = 1024  # reserved and enforced when a request names no max_tokens
    upstream_api_key: str | None = None  # default key for openai backends without their own
    engine_api_key: str | None = None  # default key for local engine servers (their --api-key)
    upstream_timeout_s: float = 60.0
    upstream_max_retries: int = 2
    # A reservation lives this long unless its replica renews it (a heartbeat every third of
    # it, while the request runs): a crashed replica's slots come back after about this long.
    reservation_ttl_s: int = Field(default=30, ge=1, le=86400)
    usage_batch_size: int = 500
    usage_flush_interval_s: float = 0.2  # bigger batches, fewer commits; off the request path
    # Database unreachable: `journal` keeps serving and appends usage rows to a local fsync'd
    # file, replayed when it is back; `refuse` answers 503 before reserving until it is back.
    usage_on_db_unavailable: Literal["refuse", "journal"] = "journal"
    classify_timeout_s: float = 2.0  # detector time cap per request; past it the request is sensitive
    usage_journal_path: str | None = None  # default: fairgate-usage-<hash of the database url>.journal
    usage_journal_max_bytes: int = Field(default=256 << 20, ge=4096)  # full: refuse, never drop
    default_priority: str = "standard"
    log_level: str = "info"  # debug|info|warning|error|critical; info: a line per request, engine stats
    # GET /metrics wants `Authorization: Bearer <metrics_token or admin_token>` unless anonymous
    # scrapes are allowed; tenant ids become metric labels only when asked (they list tenants)
    metrics_token: str | None = None
    metrics_anonymous: bool = False
    metrics_tenant_labels: bool = False
    # request headers (gateway/serve.py, backends/openai_wire/headers.py): over these → 431
    max_header_bytes: int = Field(default=16_384, ge=256)  # one header, name + value
    max_headers_total_bytes: int = Field(default=65_536, ge=1024)
    max_header_count: int = Field(default=100, ge=8)
    # failed-auth throttle (gateway/request/auth_throttle.py): this many bad keys from one client address
    # within the window → 429 with Retry-After for unknown keys from it; 0 turns it off
    auth_failures_max: int = Field(default=20, ge=0)
    auth_failures_window_s: float = Field(default=60.0, gt=0)
    # upstream secrets (backend and pool API keys) are Fernet-encrypted in the database with this
    # key (or the first line of secrets_key_file); several keys, comma-separated: the first
    # encrypts, all decrypt (rotation). Generate one: see README ("Upstream keys at rest").
    secrets_key: str | None = Field(default=None, repr=False)
    secrets_key_file: str | None = None

    # what one request may ask for: overrides of backends/openai_wire/limits.WireLimits by name
    # (e.g. {"max_n": 16}); the embedded engine gets the same, and its grammar time cap
    request_limits: dict[str, float] = Field(default_factory=dict)
    grammar_timeout_s: float = Field(default=3.0, gt=0)

    def header_limits(self) -> HeaderLimits:
        return HeaderLimits(self.max_header_bytes, self.max_headers_total_bytes, self.max_header_count)
    control_secret: str | None = None  # sent to engine servers' /control/* (their --control-secret)
    fairness_sync_interval_s: float = 5.0  # re-push weights to engines that lost them (restart)
    shutdown_grace_s: float = 30.0  # on SIGTERM: time for in-flight requests and streams to finish
    # Python's collector thresholds once the app is up (backends/collector.py): full collections,
    # which stop the process and every stream with it, come a tenth as often as with Python's 700,10,10.
    gc_threshold: str = "700,10,100"

    @cached_property
    def wire_limits(self) -> WireLimits:
        """WireLimits with `request_limits` applied: read once (admission asks on every request)."""
        return parse_limit_overrides(self.request_limits, WireLimits())  # type: ignore[no-any-return]

    @field_validator("request_limits")
    @classmethod
    def _request_limits(cls, value: dict[str, float]) -> dict[str, float]:
        parse_limit_overrides(value, WireLimits())  # an unknown name or a bad value is a ValueError
        return value

    @field_validator("gc_threshold")
    @classmethod
    def _gc_threshold(cls, value: str) -> str:
        parse_threshold(value)  # three integers >= 1, or a ValueError that says so
        return value

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, value: str) -> str:
        level = value.strip().lower()
        if level not in LOG_LEVELS:
            raise ValueError(f"log_level must be one of {', '.join(LOG_LEVELS)}")
        return level


def _read_file(path: str) -> dict[str, Any]:
    text = Path(path).read_text()
    if path.endswith((".yaml", ".yml")):
        import yaml

        data = yaml.safe_load(text) or {}
    else:
        data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"settings file {path} must hold a mapping")
    return data


def unknown_settings(data: dict[str, Any], where: str = "") -> list[str]:
    """Paths of keys that are no setting (a typo like `admin_tokn` must not pass silently)."""
    return [f"{where}{k}" for k in data if k not in Settings.model_fields]


def load_settings(config_file: str | None = None, values: dict[str, Any] | None = None,
                  **overrides: Any) -> Settings:
    """Settings from `overrides` (CLI flags), then FAIRGATE_* env, then the file (or `values`,
    the settings part of a declarative file), then defaults. Unknown file keys are refused."""
    file_values = dict(values or {})
    if config_file:
        file_values.update(_read_file(config_file))
    bad = unknown_settings(file_values)
    if bad:
        raise ValueError(f"unknown setting {bad[0]!r} in {config_file or 'the configuration'}")
    values = {}
    if file_values:
        for key, value in file_values.items():
            # the environment wins over the file, so only take file keys the env does not set
            if f"{ENV_PREFIX}{key.upper()}" not in os.environ:
                values[key] = value
    values.update({k: v for k, v in overrides.items() if v is not None})
    return Settings(**values)
