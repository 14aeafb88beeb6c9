"""Settlement: once a reserved request ends (answered, failed, cut off), replace the reservation
by what was used and record one usage row. Runs exactly once per admitted request."""

from __future__ import annotations

import logging
import time
from typing import Any

from fairgate.backends.prompt_version import prompt_version
from fairgate.gateway.billing.usage import UsageEvent
from fairgate.gateway.request.admission import Admitted
from fairgate.gateway.request.pool_share import give_back_share
from fairgate.gateway.request.state import RequestState
from fairgate.policies.complexity import complexity_score
from fairgate.policies.prompt_layout import head_fingerprint

log = logging.getLogger("fairgate.request")
ROUTES = {"chat": "/v1/chat/completions", "completion": "/v1/completions", "embedding": "/v1/embeddings"}


async def finish(state: RequestState, adm: Admitted, status: str, backend: str | None, http_status: int,
                 usage: dict[str, Any] | None, completion_seen: int = 0, code: str | None = None) -> None:
    """Settle the reservation with what was used and queue the usage record (exactly once).

    `usage` is the backend's usage object (None: unknown; then what the backend counted so far,
    or failing that the prompt bound and the text chunks seen, marked estimated)."""
    prompt, completion, estimated = _used_tokens(adm, backend, usage, completion_seen)
    price = state.prices.get(backend) if backend else None
    cost = price.cost(prompt, completion) if price else 0.0
    try:
        await state.quota.settle(adm.rid, prompt + completion, cost)
    except Exception as exc:  # the reservation's TTL releases it; the usage row still counts
        log.warning("settle failed for a request (%s)", type(exc).__name__)
    now = time.perf_counter()
    texts = adm.parsed.texts
    signals = state.settings.advice_signals
    head, shape = head_fingerprint(texts) if signals else ("", "")
    event = UsageEvent(
        request_id=adm.rid, tenant_id=adm.principal.tenant_id, key_prefix=adm.principal.prefix,
        model=adm.parsed.model or "", backend=backend, priority=adm.priority, status=status,
        stream=adm.parsed.stream, prompt_tokens=prompt, completion_tokens=completion,
        usage_estimated=estimated, cost=cost, http_status=http_status,
        ttft_ms=None if adm.ttft is None else (adm.ttft - adm.t0) * 1000, latency_ms=(now - adm.t0) * 1000,
        route=adm.route or ROUTES.get(adm.kind, adm.kind), cached_tokens=_cached_tokens(usage),
        overhead_ms=adm.overhead_ms, prompt_version=prompt_version(adm.prompt_version_header, adm.parsed.body),
        prefix_hash=head, prefix_shape=shape, complexity=_complexity(texts, prompt) if signals else None,
        error_code=code)
    await give_back_share(state, adm.rid)
    state.usage.record(event)
    for observer in state.request_observers:
        observer(event)


def _used_tokens(adm: Admitted, backend: str | None, usage: dict[str, Any] | None,
                 completion_seen: int) -> tuple[int, int, bool]:
    """(prompt, completion, estimated): the backend's usage object when it gave one; else what
    the backend counted as it went (`adm.gen.used`: exact for our engines, local or served);
    else the prompt bound and the text chunks seen, marked estimated."""
    prompt = usage.get("prompt_tokens") if usage else None
    if isinstance(prompt, int):
        assert usage is not None
        return prompt, int(usage.get("completion_tokens") or 0), False
    if backend is None:  # no backend took it: nothing was used
        return 0, completion_seen, True
    used = adm.gen.used
    exact_prompt, exact_completion = used.prompt_tokens, used.completion_tokens
    return (adm.parsed.prompt_tokens_bound if exact_prompt is None else exact_prompt,
            completion_seen if exact_completion is None else exact_completion,
            exact_prompt is None or exact_completion is None)


def _cached_tokens(usage: dict[str, Any] | None) -> int:
    details = usage.get("prompt_tokens_details") if usage else None
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return cached if isinstance(cached, int) and cached >= 0 else 0


def _complexity(texts: list[str], prompt_tokens: int) -> float | None:
    try:  # scored after the answer went out: what a smaller-model route would have seen
        return complexity_score(texts, prompt_tokens or None)
    except Exception:  # noqa: BLE001 - a scoring bug must never lose the usage row
        return None
