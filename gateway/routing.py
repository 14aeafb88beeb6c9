"""The seam between the gateway's request path and the routing policy.

The request path builds a `RouteRequest`, asks `Router.decide()`, then tries the returned
backends in order. The sensitivity invariant (personal data → local backends only) is enforced
here *and* again by the request path right before it calls a backend.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from backends.base import Backend


class NoRouteError(Exception):
    """No backend may take this request. `status`: 404 unknown model, 503 nothing available."""

    def __init__(self, message: str, status: int = 503, code: str = "no_backend") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass(slots=True)
class RouteRequest:
    """What the router may look at. Prompt text is inspected, never stored or logged."""

    tenant_id: str
    tenant_name: str
    model: str  # what the client asked for (alias, real name, or "auto")
    priority: str
    data_residency: str = "any"  # "local_only" or "any"
    classification_header: str | None = None  # X-Data-Classification: sensitive|public
    texts: list[str] = field(default_factory=list)  # message contents / prompt parts
    prompt_tokens: int | None = None
    tenant_patterns: list[str] = field(default_factory=list)


@dataclass(slots=True)
class RouteDecision:
    backends: list[Backend]  # primary first, then fallbacks; already filtered for sensitivity
    sensitive: bool
    reason: str
    rule_id: str | None = None
    finding_kinds: list[str] = field(default_factory=list)


class Router:
    """Minimal router: a model name or alias maps to one backend; local-only when sensitive.

    Replaced by the rule-based router of the routing issue behind the same `decide()`.
    """

    def __init__(self, backends: dict[str, Backend], aliases: dict[str, str] | None = None) -> None:
        self.backends = backends
        self.aliases = aliases or {}

    def decide(self, request: RouteRequest) -> RouteDecision:
        name = self.aliases.get(request.model, request.model)
        backend = self.backends.get(name)
        if backend is None:
            raise NoRouteError(f"The model `{request.model}` does not exist", 404, "model_not_found")
        sensitive = request.data_residency == "local_only" or request.classification_header == "sensitive"
        if sensitive and not backend.is_local:
            raise NoRouteError("No local backend can take this sensitive request", 503, "no_local_backend")
        return RouteDecision([backend], sensitive, reason=f"model:{name}")
