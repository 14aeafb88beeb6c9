"""One log line per finished request, at info: a request observer (runs after the response
went out), and one for each request refused before admission (no usage row: bad key,
unknown model, quota, ...). It names the request, tenant, route, backend, status, tokens and times; never the
prompt, the output or the key (only the tenant id; the key's prefix is in the usage row)."""

from __future__ import annotations

import logging
import time

from fairgate.gateway.billing.usage import UsageEvent
from fairgate.gateway.observability.refusals import refusal_reason

log = logging.getLogger("fairgate.requests")


def log_request(e: UsageEvent) -> None:
    if not log.isEnabledFor(logging.INFO):
        return
    ttft = f"{e.ttft_ms:.1f}" if e.ttft_ms is not None else "-"
    log.info("request %s tenant=%s route=%s model=%s backend=%s priority=%s status=%s http=%d stream=%s "
             "prompt_tokens=%d completion_tokens=%d cached_tokens=%d ttft_ms=%s latency_ms=%.1f",
             e.request_id, e.tenant_id, e.route or "-", e.model, e.backend or "-", e.priority, e.status,
             e.http_status, "yes" if e.stream else "no", e.prompt_tokens, e.completion_tokens,
             e.cached_tokens, ttft, e.latency_ms)


def log_refusal(route: str, status: int, code: str | None, t0: float, tenant: str | None = None) -> None:
    """A request refused before it was admitted, by its error code; the tenant once its key was
    known good (a quota 429, a validation 400), never a guess from a wrong key."""
    if log.isEnabledFor(logging.INFO):
        log.info("request refused tenant=%s route=%s http=%d code=%s reason=%s latency_ms=%.1f", tenant or "-",
                 route or "-", status, code or "-", refusal_reason(status, code), (time.perf_counter() - t0) * 1000)

