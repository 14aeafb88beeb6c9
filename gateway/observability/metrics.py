"""The gateway's Prometheus metrics: one `CollectorRegistry` per app, built in the lifespan.

Fed by the app's request observers (one `UsageEvent` per finished request, after the response
went out), so nothing here runs on the hot path before the client has its answer. Labels:
tenant (id), route (API path), backend, model (as the client named it), priority. Histograms
and counters share names with the engine server's (`backends/local/engine/metrics.py`); a dashboard
tells them apart by the scrape job. What the gateway sees of a request:

- TTFT: arrival at the gateway to the first streamed byte (streams only: a non-streamed
  answer's first byte is its last, that is end-to-end latency).
- inter-token latency: one observation per streamed request, its mean gap between chunks
  (observing every gap would cost the hot path per token).
- end-to-end latency, tokens (prompt, generated, cached), prefix-cache queries and hits in
  tokens by prompt version, requests by status, gateway overhead (time to the first byte minus
  the time spent waiting on backends; also the `x-fairgate-overhead-ms` response header).

An embedded engine adds its gauges (running / waiting requests, KV blocks, preemptions).
`GET /metrics` wants `Authorization: Bearer <FAIRGATE_METRICS_TOKEN or the admin token>` unless
`metrics_anonymous` is set (backends/metrics_access.py). The tenant label stays empty unless
`metrics_tenant_labels` is set: a scrape would otherwise list every tenant id.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Gauge
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fairgate.backends.local.engine.metrics import (
    E2E_BUCKETS,
    ITL_BUCKETS,
    TTFT_BUCKETS,
    EngineStatsCollector,
)
from fairgate.backends.metric_series import FastCounter, FastHistogram
from fairgate.backends.metrics_access import MetricsAccess, metrics_response
from fairgate.backends.openai_wire.headers import bearer
from fairgate.backends.prompt_version import NONE, LabelCap
from fairgate.gateway.admin.token import admin_token_ok
from fairgate.gateway.billing.usage import UsageEvent, UsageRecorder
from fairgate.gateway.observability.cost_metrics import CostCollector
from fairgate.gateway.observability.refusals import refusal_reason
from fairgate.gateway.observability.state import observability_state

if TYPE_CHECKING:
    from fairgate.backends.local.serving.backend import LocalBackend

LABELS = ("tenant", "route", "backend", "model", "priority")
OVERHEAD_BUCKETS = (0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.0075, 0.01,
                    0.025, 0.05, 0.1, 0.25)


class _Children:
    """Resolved children for one label combination (`labels()` is a lookup plus a lock)."""

    __slots__ = ("ttft", "itl", "e2e", "overhead", "prompt", "generation", "cached")

    def __init__(self, m: GatewayMetrics, key: tuple[str, ...]) -> None:
        self.ttft = m.ttft.labels(*key)
        self.itl = m.itl.labels(*key)
        self.e2e = m.e2e.labels(*key)
        self.overhead = m.overhead.labels(*key)
        self.prompt = m.prompt_tokens.labels(*key)
        self.generation = m.generation_tokens.labels(*key)
        self.cached = m.cached_tokens.labels(*key)


class GatewayMetrics:
    def __init__(self, registry: CollectorRegistry, tenant_labels: bool = False) -> None:
        r = self.registry = registry
        self.tenant_labels = tenant_labels
        self.ttft = FastHistogram("fairgate_time_to_first_token_seconds", "Gateway arrival to the first generated "
                              "token: a stream's first content chunk sent (not the role chunk), a whole answer's "
                              "first token as our engine timed it.", LABELS, registry=r, buckets=TTFT_BUCKETS)
        self.itl = FastHistogram("fairgate_inter_token_latency_seconds", "Mean gap between streamed chunks, one "
                             "observation per streamed request.", LABELS, registry=r, buckets=ITL_BUCKETS)
        self.e2e = FastHistogram("fairgate_e2e_request_latency_seconds", "Gateway arrival to the end of the "
                             "response.", LABELS, registry=r, buckets=E2E_BUCKETS)
        self.overhead = FastHistogram("fairgate_gateway_overhead_seconds", "Gateway time to the first byte, "
                                  "excluding time spent waiting on backends.", LABELS, registry=r,
                                  buckets=OVERHEAD_BUCKETS)
        self.prompt_tokens = FastCounter("fairgate_prompt_tokens", "Prompt tokens.", LABELS, registry=r)
        self.generation_tokens = FastCounter("fairgate_generation_tokens", "Generated tokens.", LABELS, registry=r)
        self.cached_tokens = FastCounter("fairgate_cached_prompt_tokens", "Prompt tokens served from a prefix "
                                     "cache.", LABELS, registry=r)
        self.requests = FastCounter("fairgate_requests", "Finished requests by status and HTTP code.",
                                (*LABELS, "status", "code"), registry=r)
        self.refusals = FastCounter("fairgate_refusals", "Requests answered with an error and no backend's answer, "
                                "by route and reason (auth, quota, validation, context_length, no_backend, "
                                "sensitive_without_local, unavailable, upstream_error); kept out of the latency "
                                "histograms.", ("route", "reason"), registry=r)
        self._refusals: dict[tuple[str, str], Any] = {}
        pc = ("tenant", "route", "backend", "model", "prompt_version")
        self.pc_queries = FastCounter("fairgate_prefix_cache_queries_tokens", "Prompt tokens looked up in a "
                                  "prefix cache.", pc, registry=r)
        self.pc_hits = FastCounter("fairgate_prefix_cache_hits_tokens", "Prompt tokens found in a prefix cache.",
                               pc, registry=r)
        self._children: dict[tuple[str, ...], _Children] = {}
        self._pc: dict[tuple[str, ...], tuple[Any, Any]] = {}
        self._status: dict[tuple[str, ...], Any] = {}
        self._versions = LabelCap()
        self.costs = CostCollector(tenant_labels)  # registered by make_metrics; refreshed at scrape time

    def refused(self, route: str, reason: str) -> None:
        counter = self._refusals.get((route, reason))
        if counter is None:
            counter = self._refusals[(route, reason)] = self.refusals.labels(route, reason)
        counter.inc()

    def _count(self, key: tuple[str, ...], e: UsageEvent) -> None:
        status_key = (*key, e.status, str(e.http_status))
        counter = self._status.get(status_key)
        if counter is None:
            counter = self._status[status_key] = self.requests.labels(*status_key)
        counter.inc()

    def observe(self, e: UsageEvent) -> None:
        """A request observer: account for one finished request."""
        backend = e.backend or "none"
        tenant = e.tenant_id if self.tenant_labels else ""
        key = (tenant, e.route, backend, e.model, e.priority)
        c = self._children.get(key)
        if c is None:
            c = self._children[key] = _Children(self, key)
        self._count(key, e)
        if e.backend is None:  # no backend answered: a refusal, not a latency
            self.refused(e.route, refusal_reason(e.http_status, e.error_code))
            return
        c.e2e.observe(e.latency_ms / 1000)
        if e.overhead_ms is not None:
            c.overhead.observe(e.overhead_ms / 1000)
        if e.ttft_ms is not None:
            c.ttft.observe(e.ttft_ms / 1000)
            if e.completion_tokens > 1:
                c.itl.observe(max(e.latency_ms - e.ttft_ms, 0.0) / 1000 / (e.completion_tokens - 1))
        c.prompt.inc(e.prompt_tokens)
        c.generation.inc(e.completion_tokens)
        if e.usage_estimated:  # we do not know what was looked up
            return
        pc_key = (tenant, e.route, backend, e.model, self._versions(e.prompt_version or NONE))
        pc = self._pc.get(pc_key)
        if pc is None:
            pc = self._pc[pc_key] = (self.pc_queries.labels(*pc_key), self.pc_hits.labels(*pc_key))
        pc[0].inc(e.prompt_tokens)
        if e.cached_tokens:  # the series exist from labels(); adding 0 costs a locked call for nothing
            c.cached.inc(e.cached_tokens)
            pc[1].inc(e.cached_tokens)


def make_metrics(embedded: LocalBackend | None, tenant_labels: bool = False) -> GatewayMetrics:
    """The app's registry and metrics, with the embedded engine's gauges and the real cost
    (gateway/observability/cost_metrics.py). The lifespan feeds `metrics.observe` every finished request
    (ObservabilityState.request_observers)."""
    registry = CollectorRegistry()
    metrics = GatewayMetrics(registry, tenant_labels)
    registry.register(metrics.costs)
    if embedded is not None:
        registry.register(EngineStatsCollector(embedded.engine, embedded.model_name, tenant_labels))
    return metrics


def watch_usage_backlog(metrics: GatewayMetrics, usage: UsageRecorder) -> None:
    """`fairgate_usage_pending_rows`: rows queued in memory or journaled while the database is away."""
    pending = Gauge("fairgate_usage_pending_rows", "Usage rows not yet in the database (queued in memory "
                    "or journaled to the local file while the database is unreachable).", registry=metrics.registry)
    pending.set_function(usage.pending_rows)


async def metrics_endpoint(request: Request) -> Response:
    state = observability_state(request.app)
    settings = state.settings
    access = MetricsAccess(settings.metrics_token, settings.metrics_anonymous, settings.metrics_tenant_labels)
    authorization, also = request.headers.get("authorization"), (settings.admin_token,)
    if admin_token_ok(state, bearer(authorization) or ""):  # also the token made on first start
        access = replace(access, anonymous=True)
    if access.refusal(authorization, also) is None:
        await state.metrics.costs.refresh(state)  # (a refused scrape costs no query)
    return metrics_response(state.metrics.registry, access, authorization, also)


def metrics_routes() -> list[Route]:
    return [Route("/metrics", metrics_endpoint, methods=["GET"])]
