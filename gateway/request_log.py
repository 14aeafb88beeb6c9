"""One log line per finished request, at info: a request observer (runs after the response
went out). It names the request, tenant, route, backend, status, tokens and times; never the
prompt, the output or the key (only the tenant id; the key's prefix is in the usage row)."""

from __future__ import annotations

import logging

from gateway.usage import UsageEvent

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
