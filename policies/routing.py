"""Ordered routing rules and the sensitivity invariant: pure functions, no I/O.

A rule matches on tenant, requested model (exact or glob, e.g. "gpt-*" or "auto"), sensitivity,
priority class, prompt-token bounds and the complexity score; it names a backend and fallbacks.
The first matching rule with an eligible backend decides. With no matching rule, a model name
that is a backend's name (or an alias of one) routes straight to it.

The invariant — a sensitive request goes only to local backends — holds twice over:
`validate_rules` rejects, at save time, any rule that could match a sensitive request and names
an external backend (so such a rule must say `sensitivity: "public"`), and `evaluate` filters
external backends out of every sensitive plan whatever the rules say.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase

SENSITIVITY_VALUES = ("sensitive", "public")


class RoutingError(Exception):
    """No backend may take the request. `status` 404 (unknown model) or 503 (none usable)."""

    def __init__(self, message: str, status: int, code: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass(slots=True, frozen=True)
class RuleMatch:
    """Every field that is set must match; an empty match matches every request."""

    tenant: str | None = None  # tenant name or id
    model: str | None = None  # requested model/alias; glob patterns allowed
    sensitivity: str | None = None  # "sensitive" | "public" | None (both)
    priority: str | None = None
    max_prompt_tokens: int | None = None
    min_prompt_tokens: int | None = None
    max_complexity: float | None = None  # for model "auto": simple requests to a small model


@dataclass(slots=True, frozen=True)
class Rule:
    id: str
    match: RuleMatch
    backend: str
    fallbacks: tuple[str, ...] = ()


@dataclass(slots=True, frozen=True)
class RouteFacts:
    """What a rule can look at. `complexity` may be None when no rule asks for it."""

    tenant: str
    model: str
    sensitive: bool
    priority: str = "standard"
    tenant_id: str = ""
    prompt_tokens: int | None = None
    complexity: float | None = None


@dataclass(slots=True, frozen=True)
class RoutePlan:
    backends: tuple[str, ...]  # try in order
    rule_id: str | None
    reason: str


def rule_matches(m: RuleMatch, f: RouteFacts, *, ignore_sensitivity: bool = False) -> bool:
    if m.tenant is not None and m.tenant not in (f.tenant, f.tenant_id):
        return False
    if m.model is not None and not fnmatchcase(f.model, m.model):
        return False
    if not ignore_sensitivity and m.sensitivity is not None:
        if m.sensitivity != ("sensitive" if f.sensitive else "public"):
            return False
    if m.priority is not None and m.priority != f.priority:
        return False
    if m.max_prompt_tokens is not None or m.min_prompt_tokens is not None:
        if f.prompt_tokens is None:
            return False
        if m.max_prompt_tokens is not None and f.prompt_tokens > m.max_prompt_tokens:
            return False
        if m.min_prompt_tokens is not None and f.prompt_tokens < m.min_prompt_tokens:
            return False
    if m.max_complexity is not None:
        # Unknown complexity never counts as simple.
        if f.complexity is None or f.complexity > m.max_complexity:
            return False
    return True


def validate_rules(rules: list[Rule], locality: Mapping[str, bool]) -> list[str]:
    """Errors that make a rule list unsafe or meaningless; empty when it may be saved.

    `locality` maps every known backend name to True when it is local.
    """
    errors: list[str] = []
    seen: set[str] = set()
    for i, r in enumerate(rules):
        where = f"rule {i} ({r.id!r})"
        if not r.id:
            errors.append(f"rule {i}: id must not be empty")
        elif r.id in seen:
            errors.append(f"{where}: duplicate id")
        seen.add(r.id)
        m = r.match
        if m.sensitivity is not None and m.sensitivity not in SENSITIVITY_VALUES:
            errors.append(f"{where}: match.sensitivity must be 'sensitive' or 'public'")
        for name in ("max_prompt_tokens", "min_prompt_tokens"):
            v = getattr(m, name)
            if v is not None and v < 0:
                errors.append(f"{where}: match.{name} must be >= 0")
        if m.max_complexity is not None and not 0.0 <= m.max_complexity <= 1.0:
            errors.append(f"{where}: match.max_complexity must be within [0, 1]")
        pool = (r.backend, *r.fallbacks)
        if len(set(pool)) != len(pool):
            errors.append(f"{where}: a backend appears twice in backend + fallbacks")
        for name in pool:
            if name not in locality:
                errors.append(f"{where}: unknown backend {name!r}")
            elif not locality[name] and m.sensitivity != "public":
                errors.append(
                    f"{where}: can match sensitive requests but names external backend {name!r}; "
                    "set match.sensitivity to 'public' or use only local backends"
                )
    return errors


def evaluate(
    rules: list[Rule],
    facts: RouteFacts,
    locality: Mapping[str, bool],
    *,
    aliases: Mapping[str, str] | None = None,
    unavailable: frozenset[str] = frozenset(),
) -> RoutePlan:
    """Pick the ordered backends for one request, or raise `RoutingError`.

    A backend that is unknown, known-unavailable, or external for a sensitive request is
    dropped from a plan. Raises 503 `no_local_backend` when the model exists but nothing local
    can take a sensitive request, 503 `no_backend_available` when every candidate is down, and
    404 `model_not_found` when nothing routes the model at all.
    """
    model_known = False
    dropped_down = False
    for r in rules:
        if not rule_matches(r.match, facts, ignore_sensitivity=True):
            continue
        model_known = True
        if not rule_matches(r.match, facts):
            continue
        pool = _eligible((r.backend, *r.fallbacks), facts.sensitive, locality)
        usable = tuple(b for b in pool if b not in unavailable)
        if usable:
            return RoutePlan(usable, r.id, f"rule:{r.id}")
        dropped_down = dropped_down or bool(pool)
    direct = (aliases or {}).get(facts.model, facts.model)
    if direct in locality:
        model_known = True
        pool = _eligible((direct,), facts.sensitive, locality)
        usable = tuple(b for b in pool if b not in unavailable)
        if usable:
            return RoutePlan(usable, None, f"model:{direct}")
        dropped_down = dropped_down or bool(pool)
    if dropped_down:
        raise RoutingError("Every backend for this request is unavailable", 503, "no_backend_available")
    if model_known and facts.sensitive:
        raise RoutingError(
            "This request is classified as sensitive (personal data or a local-only tenant) "
            "and no local backend can serve it; it was not sent to any external API",
            503,
            "no_local_backend",
        )
    raise RoutingError(f"The model `{facts.model}` does not exist", 404, "model_not_found")


def _eligible(names: tuple[str, ...], sensitive: bool, locality: Mapping[str, bool]) -> tuple[str, ...]:
    # The invariant, enforced here whatever a rule says: sensitive → local backends only.
    return tuple(n for n in names if n in locality and (locality[n] or not sensitive))
