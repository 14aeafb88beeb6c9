"""The seam between the gateway's request path and the routing policy.

The request path builds a `RouteRequest`, asks `Router.decide()`, then tries the returned
backends in order. `decide` classifies the prompt (policies.residency: tenant setting, header,
detectors; a detector failure counts as sensitive; token-id prompts are read back to text with
the tokenizer of a local backend serving the model, and count as sensitive when none can read them), scores complexity when a rule asks for it,
evaluates the ordered rules (policies.routing) and audits the decision. The sensitivity
invariant (personal data → local backends only) is enforced by the rule engine, checked once
more here on the Backend objects' own `is_local`, and again by the request path right before
it calls a backend.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from fairgate.gateway.request.classification import Classifier
from fairgate.policies.complexity import complexity_score
from fairgate.policies.detection_options import DEFAULT_OPTIONS, DetectionOptions
from fairgate.policies.request_texts import readable_parts
from fairgate.policies.residency import SensitivityVerdict, parse_classification_header
from fairgate.policies.routing import RouteFacts, RoutingError, Rule, evaluate

if TYPE_CHECKING:
    from fairgate.backends.base import Backend, TokenDecoder
    from fairgate.gateway.observability.routing_audit import RoutingAuditWriter

log = logging.getLogger("fairgate.routing")


class NoRouteError(Exception):
    """No backend may take this request. `status`: 404 unknown model, 503 nothing available,
    400 bad X-Data-Classification header."""

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
    request_id: str | None = None  # for the audit row only
    # The whole request body as it will be forwarded. When given, every string in it is
    # classified (tool arguments, names, ...) and non-text parts make the request sensitive;
    # `texts` is then only a fallback for callers that have no body.
    body: dict[str, Any] | None = None


@dataclass(slots=True)
class RouteDecision:
    backends: list[Backend]  # primary first, then fallbacks; already filtered for sensitivity
    sensitive: bool
    reason: str
    rule_id: str | None = None
    finding_kinds: list[str] = field(default_factory=list)
    spans: list[tuple[str, int, int]] = field(default_factory=list)  # (kind, start, end), no text


@dataclass(slots=True, frozen=True)
class TenantDetectors:
    """A tenant's own additions to the PII detectors."""

    patterns: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    options: DetectionOptions = DEFAULT_OPTIONS  # names alone, companies' identifiers, institutions' lines


_NO_DETECTORS = TenantDetectors()


class Router:
    """Rule-based router over a fixed set of backends (rebuilt when the configuration changes).

    `backends`: name → Backend; `aliases`: model alias → backend name (used when no rule
    matches); `rules`: ordered routing rules; `tenants`: tenant id → its own detectors;
    `audit`: where decisions are recorded (None: not audited); `fail_closed`: treat every
    request as sensitive (set when the routing configuration could not be loaded);
    `classifier`: runs the detectors off the event loop with a time cap, failing closed
    (gateway.request.classification; a private thread-pool one if None).
    """

    def __init__(
        self,
        backends: dict[str, Backend],
        aliases: dict[str, str] | None = None,
        *,
        rules: list[Rule] | None = None,
        tenants: Mapping[str, TenantDetectors] | None = None,
        audit: RoutingAuditWriter | None = None,
        fail_closed: bool = False,
        classifier: Classifier | None = None,
    ) -> None:
        self.backends = backends
        self.aliases = aliases or {}
        self.rules = list(rules or [])
        self.tenants = dict(tenants or {})
        self.audit = audit
        self.fail_closed = fail_closed
        self.classifier = classifier or Classifier()  # detectors run off the event loop, capped
        self.locality = {name: bool(b.is_local) for name, b in backends.items()}
        # Complexity is scored only for models some max_complexity rule can match ("auto").
        self._complexity_models = [r.match.model for r in self.rules if r.match.max_complexity is not None]

    async def decide(self, request: RouteRequest) -> RouteDecision:
        """Ordered backends for `request`, or NoRouteError (400 / 404 / 503)."""
        try:
            header = parse_classification_header(request.classification_header)
        except ValueError as exc:
            raise NoRouteError(str(exc), 400, "invalid_classification_header") from None
        own = self.tenants.get(request.tenant_id, _NO_DETECTORS)
        texts, opaque = list(request.texts), False
        token_prompts: list[list[int]] = []
        readers: list[TokenDecoder] = []
        if request.body is not None:
            parts = readable_parts(request.body)
            texts, opaque, token_prompts = parts.texts, parts.opaque, parts.token_prompts
            if token_prompts and not opaque:
                decoded = self._detokenise(request, token_prompts)
                opaque = decoded is None  # ids no tokenizer here can read: sensitive (fail closed)
                if decoded is not None:
                    texts, readers = texts + decoded[0], decoded[1]
        verdict = await self.classifier.assess(
            texts,
            data_residency="local_only" if self.fail_closed else request.data_residency,
            header=header,
            patterns=(*request.tenant_patterns, *own.patterns),
            keywords=own.keywords,
            opaque=opaque,
            options=own.options,
        )
        complexity = None
        if any(m is None or fnmatchcase(request.model, m) for m in self._complexity_models):
            try:
                complexity = complexity_score(request.texts, request.prompt_tokens)
            except Exception:  # noqa: BLE001 - unknown complexity is never "simple"
                complexity = None
        facts = RouteFacts(
            tenant=request.tenant_name, tenant_id=request.tenant_id, model=request.model,
            sensitive=verdict.sensitive, priority=request.priority,
            prompt_tokens=request.prompt_tokens, complexity=complexity,
        )
        try:
            plan = evaluate(self.rules, facts, self.locality, aliases=self.aliases)
        except RoutingError as exc:
            self._record(request, verdict, None, [], exc.code, exc.status)
            raise NoRouteError(str(exc), exc.status, exc.code) from None
        chosen = [self.backends[n] for n in plan.backends]
        if token_prompts and not verdict.sensitive:
            # read above as the harmless plan's backends read them; a plan that differs (a
            # complexity rule) may only keep backends whose tokenizer read them
            chosen = [b for b in chosen if b.token_decoder is not None and b.token_decoder in readers]
        if verdict.sensitive or (token_prompts and not chosen):
            # The Backend object has the last word on locality, whatever the rule engine saw.
            chosen = [b for b in chosen if b.is_local]
            if not chosen:
                self._record(request, verdict, plan.rule_id, [], "no_local_backend", 503)
                raise NoRouteError(_NO_LOCAL, 503, "no_local_backend")
        reasons = (plan.reason, *verdict.reasons)
        self._record(request, verdict, plan.rule_id, [b.name for b in chosen], plan.reason, 200)
        return RouteDecision(chosen, verdict.sensitive, ";".join(reasons), plan.rule_id, list(verdict.kinds),
                             list(verdict.spans))

    def _detokenise(self, request: RouteRequest, prompts: list[list[int]]
                    ) -> tuple[list[str], list[TokenDecoder]] | None:
        """Token-id prompts as text, as each backend they may be sent to will read them, and the
        tokenizers that read them.

        Ids mean what the receiving model's tokenizer says (cl100k ids of a TCKN read as harmless
        words with ours), so they are read with the tokenizer of every backend the rules would send
        a harmless request to; None (unreadable: sensitive) when one of them offers no tokenizer
        (an external API) or an id is outside a vocabulary."""
        facts = RouteFacts(tenant=request.tenant_name, tenant_id=request.tenant_id, model=request.model,
                           sensitive=False, priority=request.priority, prompt_tokens=request.prompt_tokens)
        try:
            plan = evaluate(self.rules, facts, self.locality, aliases=self.aliases)
        except RoutingError:
            return None
        found = [self.backends[n].token_decoder for n in plan.backends]
        decoders = [d for d in found if d is not None]
        if not decoders or len(decoders) < len(found):
            return None
        texts: list[str] = []
        for decoder in {id(d): d for d in decoders}.values():
            size = decoder.vocab_size
            if any(not 0 <= t < size for ids in prompts for t in ids):
                return None
            try:
                texts += [decoder.decode(ids, skip_special_tokens=False) for ids in prompts]
            except Exception:  # noqa: BLE001 - ids this tokenizer cannot decode stay unread
                return None
        return texts, decoders

    def _record(
        self, request: RouteRequest, verdict: SensitivityVerdict, rule_id: str | None,
        backends: list[str], decision: str, status: int,
    ) -> None:
        if self.audit is None:
            return
        from fairgate.gateway.observability.routing_audit import AuditRecord

        self.audit.record(AuditRecord(
            tenant_id=request.tenant_id, model=request.model[:200], priority=request.priority,
            sensitive=verdict.sensitive, reasons=list(verdict.reasons), finding_kinds=list(verdict.kinds),
            finding_spans=[list(s) for s in verdict.spans[:64]], rule_id=rule_id,
            backends=backends, decision=decision, status=status, request_id=request.request_id,
        ))


RETRY_SOON = {"retry-after": "1"}  # every 503 of the local path: nothing is wrong with the request
_NO_LOCAL = ("This request is classified as sensitive (personal data or a local-only tenant) and no "
             "local backend can serve it; it was not sent to any external API")


def sensitive_unavailable(err: Exception | None) -> NoRouteError:
    """The error for a sensitive request whose local backends all failed (down, full, timed
    out): a clear 503, and a statement that nothing was sent elsewhere."""
    why = f" ({err})" if err is not None else ""
    return NoRouteError(
        "This request is classified as sensitive (personal data or a local-only tenant); the local "
        f"backends that may serve it are unavailable{why}. It was not sent to any external API; "
        "retry later.", 503, "local_backend_unavailable")
