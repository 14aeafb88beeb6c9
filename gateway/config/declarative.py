"""Declarative configuration: one YAML file for settings, backends, pools, tenants (with their
quotas), routing rules and prices, applied idempotently (`fairgate apply -f FILE`, and at start
with `fairgate serve --config FILE`).

    settings:  {admin_token: "${ENV:FAIRGATE_ADMIN_TOKEN}", database_url: ...}   # or flat at the top
    backends:  [{name, kind: openai|local|vllm, base_url, model, api_key, ...,
                 proxy_url, tls_verify, ca_bundle, client_cert, client_key, extra_headers,
                 extra_query, auth_header, max_response_bytes}]     # how it is reached
    pools:     [{name, kind: local|vllm, model, tokenizer, policy, replicas: [{name, base_url}]}]
    tenants:   [{name, weight, priority_ceiling, ..., quota: {requests_per_minute, ...},
                 sensitivity: {patterns, keywords, strict_names, legal_person_data, institutional_contacts}}]
    routes:    [{id, match, backend, fallbacks}]     # replaces the whole ordered rule list
    prices:    {backend-or-pool-name: {input_cost_per_mtok, output_cost_per_mtok, hourly_cost_usd}}

Unknown keys are refused with their path (`pools[0].replicas[1].base_ur`); a string
`${ENV:NAME}` is read from the environment (a missing variable is refused with its path), so
secrets never live in the file. Items are matched by name: listed ones are created or updated,
unlisted ones are left alone (`prune=True` deletes unlisted backends and pools and disables
unlisted tenants). Applying the same file twice changes nothing the second time.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator

from fairgate.gateway.admin import schemas as sch
from fairgate.gateway.admin.pools import PoolIn
from fairgate.gateway.settings import Settings
from fairgate.policies.sensitivity import validate_tenant_patterns

SECTIONS = ("settings", "backends", "pools", "tenants", "routes", "prices")
ENV_REF = re.compile(r"\$\{ENV:([A-Za-z_][A-Za-z0-9_]*)\}")


class ConfigError(ValueError):
    """A declarative file that cannot be applied; the message names the key's path."""


class BackendDecl(sch.BackendCreate):
    kind: Literal["openai", "local", "vllm"] = "openai"  # type: ignore[assignment]
    enabled: bool = True


class SensitivityDecl(sch._Strict):
    """A tenant's own personal-data patterns (RE2) and keywords, and its detection options
    (null: the default), as PUT /admin/tenants/{id}/sensitivity sets them."""

    patterns: list[Annotated[str, Field(min_length=1, max_length=500)]] = Field(default=[], max_length=200)
    keywords: list[Annotated[str, Field(min_length=1, max_length=500)]] = Field(default=[], max_length=200)
    strict_names: bool | None = None
    legal_person_data: bool | None = None
    institutional_contacts: bool | None = None

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, v: list[str]) -> list[str]:
        errors = validate_tenant_patterns(v)
        if errors:
            raise ValueError("; ".join(errors))
        return v


class TenantDecl(sch.TenantCreate):
    disabled: bool = False
    quota: sch.QuotaSet | None = None
    sensitivity: SensitivityDecl | None = None


class PriceDecl(sch._Strict):
    input_cost_per_mtok: float = Field(default=0.0, ge=0)
    output_cost_per_mtok: float = Field(default=0.0, ge=0)
    hourly_cost_usd: float | None = Field(default=None, ge=0, le=1e6)  # hardware price, idle or not


class Declared(sch._Strict):
    backends: list[BackendDecl] | None = None
    pools: list[PoolIn] | None = None
    tenants: list[TenantDecl] | None = None
    routes: list[dict[str, Any]] | None = None
    prices: dict[str, PriceDecl] | None = None


BACKEND_KEYS = tuple(BackendDecl.model_fields)
TENANT_KEYS = tuple(f for f in TenantDecl.model_fields if f not in ("quota", "sensitivity"))


@dataclass(slots=True)
class DeclaredFile:
    settings: dict[str, Any] = field(default_factory=dict)
    config: Declared = field(default_factory=Declared)

    @property
    def empty(self) -> bool:
        return not self.config.model_dump(exclude_none=True)


def path_of(loc: tuple[Any, ...] | list[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def resolve_env(value: Any, where: tuple[Any, ...] = ()) -> Any:
    """Replace `${ENV:NAME}` in every string; a variable that is not set is an error."""
    if isinstance(value, dict):
        return {k: resolve_env(v, (*where, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_env(v, (*where, i)) for i, v in enumerate(value)]
    if isinstance(value, str):
        def sub(m: re.Match[str]) -> str:
            if m.group(1) not in os.environ:
                raise ConfigError(f"{path_of(where)}: environment variable {m.group(1)} is not set")
            return os.environ[m.group(1)]

        return ENV_REF.sub(sub, value)
    return value


def parse(data: Any) -> DeclaredFile:
    """Validate a loaded file: settings (flat at the top or under `settings:`) and sections."""
    if data is None:
        return DeclaredFile()
    if not isinstance(data, dict):
        raise ConfigError("the configuration file must hold a mapping")
    problems: list[str] = []  # every one at once: a file with two typos is fixed in one go
    settings, sections = {}, {}
    for key, value in data.items():
        if key in SECTIONS:
            sections[key] = value
        elif key in Settings.model_fields:
            settings[key] = value
        else:
            problems.append(f"{key}: unknown key (not a setting nor one of {', '.join(SECTIONS)})")
    nested = sections.pop("settings", None) or {}
    if not isinstance(nested, dict):
        raise ConfigError("settings: must be a mapping")
    problems += [f"settings.{key}: unknown setting" for key in nested if key not in Settings.model_fields]
    settings.update(nested)
    resolved = resolve_env(sections)
    try:
        config = Declared.model_validate(resolved)
    except ValidationError as exc:
        problems += _validation_problems(exc)
    if problems:
        raise ConfigError(problems[0] if len(problems) == 1 else
                          f"{len(problems)} problems:\n" + "\n".join(f"  {p}" for p in problems))
    _check_unique(config)
    return DeclaredFile(resolve_env(settings, ("settings",)), config)


def _validation_problems(exc: ValidationError) -> list[str]:
    """One line per key at fault. A typo shows as "unknown key" and as the real key missing:
    where a mapping has an unknown key, its "field required" lines are left out (fixing the
    typo fixes them)."""
    errors = exc.errors()
    typo_parents = {tuple(e["loc"][:-1]) for e in errors if e["type"] == "extra_forbidden"}
    out = []
    for e in errors:
        if e["type"] == "missing" and tuple(e["loc"][:-1]) in typo_parents:
            continue
        out.append(f"{path_of(e['loc'])}: {'unknown key' if e['type'] == 'extra_forbidden' else e['msg']}")
    return out


def _check_unique(config: Declared) -> None:
    for section in ("backends", "pools", "tenants"):
        seen: set[str] = set()
        for i, item in enumerate(getattr(config, section) or []):
            if item.name in seen:
                raise ConfigError(f"{section}[{i}].name: {item.name!r} is listed twice")
            seen.add(item.name)
    overlap = {b.name for b in config.backends or []} & {p.name for p in config.pools or []}
    if overlap:
        raise ConfigError(f"pools: {sorted(overlap)[0]!r} is also a backend name")


def load_file(path: str | Path) -> DeclaredFile:
    text = Path(path).read_text()
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc.__class__.__name__})") from None
    return parse(data)


def split_config_file(path: str | None) -> tuple[dict[str, Any], DeclaredFile | None]:
    """`serve --config`: the settings part and (if any section is present) the rest."""
    if not path:
        return {}, None
    declared = load_file(path)
    return declared.settings, (None if declared.empty else declared)
