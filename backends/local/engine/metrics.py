"""Prometheus metrics of one engine, in a registry the caller owns (no global registry).

Two parts:
- `EngineRequestMetrics`, the engine's observer: request histograms (TTFT, inter-token latency,
  end-to-end, queue time) and token counters, labelled tenant / model / priority, plus
  prefix-cache queries and hits in tokens labelled by prompt version. It runs on the engine
  thread (`on_scheduled(plan)` each step, `on_outputs(outputs)` for each batch of deltas), so
  the times are the engine's own, not the HTTP layer's.
- `EngineStatsCollector`: gauges and engine-wide counters (running / waiting requests, KV blocks,
  preemptions, evictions) read from `AsyncEngine.stats()` when scraped, so they cost nothing
  per step.

All times are `time.monotonic()`, the clock of `SchedRequest.arrival_time`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response

from fairgate.backends.local.engine.fairness_metrics import FairnessGauges
from fairgate.backends.metric_series import FastCounter, FastHistogram
from fairgate.backends.metrics_access import MetricsAccess, metrics_response
from fairgate.backends.prompt_version import NONE, LabelCap, prompt_version
from fairgate.scheduler.request import PRIORITY_CLASSES

if TYPE_CHECKING:
    from fairgate.backends.local.engine.async_engine import AsyncEngine
    from fairgate.backends.local.engine.output import EngineStats, RequestOutput
    from fairgate.scheduler.plan import StepPlan

request_log = logging.getLogger("fairgate.engine.requests")
log = logging.getLogger(__name__)

# Buckets in seconds, shared with the gateway's histograms of the same names.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                10.0, 20.0, 40.0, 80.0)
ITL_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.5, 5.0)
E2E_BUCKETS = (0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 60.0,
               120.0, 300.0)
QUEUE_BUCKETS = (0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                 120.0)
REQUEST_LABELS = ("tenant", "model", "priority")
MAX_PENDING_VERSIONS = 10_000


class _Children:
    """The labelled children of one (tenant, model, priority): `labels()` costs a dict lookup
    and a lock, so each combination resolves them once."""

    __slots__ = ("ttft", "itl", "e2e", "queue", "prompt", "generation", "cached")

    def __init__(self, m: EngineRequestMetrics, key: tuple[str, str, str]) -> None:
        self.ttft = m.ttft.labels(*key)
        self.itl = m.itl.labels(*key)
        self.e2e = m.e2e.labels(*key)
        self.queue = m.queue.labels(*key)
        self.prompt = m.prompt_tokens.labels(*key)
        self.generation = m.generation_tokens.labels(*key)
        self.cached = m.cached_tokens.labels(*key)


@dataclass(slots=True)
class _Live:
    children: _Children
    tenant: str
    priority: str
    arrival: float
    scheduled: float
    last_token: float | None = None
    first_token: float | None = None
    who: str = ""  # the tenant, for the request log line (the metric label may be left empty)


class EngineRequestMetrics:
    """Per-request metrics of one engine; set it as `engine.observer` (see `install`)."""

    def __init__(self, registry: CollectorRegistry, model: str, tenant_labels: bool = True) -> None:
        self.model = model
        self.tenant_labels = tenant_labels  # False: the tenant label stays empty (no tenant list)
        self.log_requests = False  # `fairgate engine --log-requests`: one info line per finished request
        r = registry
        self.ttft = FastHistogram("fairgate_time_to_first_token_seconds", "Time from arrival at the engine to the "
                              "first generated token.", REQUEST_LABELS, registry=r, buckets=TTFT_BUCKETS)
        self.itl = FastHistogram("fairgate_inter_token_latency_seconds", "Time between two generated tokens of "
                             "one request.", REQUEST_LABELS, registry=r, buckets=ITL_BUCKETS)
        self.e2e = FastHistogram("fairgate_e2e_request_latency_seconds", "Time from arrival to the last token.",
                             REQUEST_LABELS, registry=r, buckets=E2E_BUCKETS)
        self.queue = FastHistogram("fairgate_queue_time_seconds", "Time from arrival to the first scheduled step.",
                               REQUEST_LABELS, registry=r, buckets=QUEUE_BUCKETS)
        self.prompt_tokens = FastCounter("fairgate_prompt_tokens", "Prompt tokens of finished requests.",
                                     REQUEST_LABELS, registry=r)
        self.generation_tokens = FastCounter("fairgate_generation_tokens", "Generated tokens of finished requests.",
                                         REQUEST_LABELS, registry=r)
        self.cached_tokens = FastCounter("fairgate_cached_prompt_tokens", "Prompt tokens served from the prefix "
                                     "cache.", REQUEST_LABELS, registry=r)
        self.requests = FastCounter("fairgate_requests", "Finished requests by finish reason.",
                                (*REQUEST_LABELS, "finish_reason"), registry=r)
        pc_labels = ("tenant", "model", "prompt_version")
        self.pc_queries = FastCounter("fairgate_prefix_cache_queries_tokens", "Prompt tokens looked up in the "
                                  "prefix cache.", pc_labels, registry=r)
        self.pc_hits = FastCounter("fairgate_prefix_cache_hits_tokens", "Prompt tokens found in the prefix cache.",
                               pc_labels, registry=r)
        self._children: dict[tuple[str, str, str], _Children] = {}
        self._pc_children: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._finish_children: dict[tuple[str, str, str], Any] = {}
        self._live: dict[str, _Live] = {}  # engine thread only
        # request id -> prompt version, set by the HTTP layer before the request reaches the engine
        self._versions: dict[str, str] = {}
        self._version_cap = LabelCap()
        self._siblings: set[str] = set()  # engine ids of non-leading choices (set_choices)

    # ------------------------------------------------------------------ any thread
    def set_prompt_version(self, request_id: str, version: str) -> None:
        if len(self._versions) >= MAX_PENDING_VERSIONS:  # only requests refused before the engine leak
            self._versions.clear()
            self._siblings.clear()
        self._versions[request_id] = version

    def set_choices(self, choice_ids: Sequence[tuple[str, bool]], version: str) -> None:
        """Label each engine request of a request with several choices (n > 1, batched
        prompts): `(engine id, leads)`. A sibling maps its leader's prompt blocks, so its prompt
        is counted once, with the leader, as usage counts it."""
        for rid, leads in choice_ids:
            self.set_prompt_version(rid, version)
            if not leads:
                self._siblings.add(rid)

    # ------------------------------------------------------------------ engine thread
    def on_scheduled(self, plan: StepPlan) -> None:
        """Remembers when each request was first scheduled (its queue time ends there)."""
        try:
            self._scheduled(plan)
        except Exception:  # noqa: BLE001 - a metrics bug must never stop the engine loop
            log.exception("metrics: on_scheduled failed")

    def on_outputs(self, outputs: Iterable[RequestOutput]) -> None:
        try:
            self._outputs(outputs)
        except Exception:  # noqa: BLE001
            log.exception("metrics: on_outputs failed")

    def _scheduled(self, plan: StepPlan) -> None:
        live = self._live
        now = time.monotonic()
        for request in plan.new_requests:
            if request.request_id not in live:
                try:
                    priority = PRIORITY_CLASSES[request.priority]
                except (IndexError, TypeError):
                    priority = str(request.priority)
                tenant = request.tenant if self.tenant_labels else ""
                key = (tenant, self.model, priority)
                children = self._children.get(key)
                if children is None:
                    children = self._children[key] = _Children(self, key)
                live[request.request_id] = _Live(children, tenant, priority, request.arrival_time, now,
                                                 who=request.tenant)

    def _outputs(self, outputs: Iterable[RequestOutput]) -> None:
        now = time.monotonic()
        for out in outputs:
            entry = self._live.get(out.request_id)
            if entry is None:  # aborted before it was ever scheduled
                self._versions.pop(out.request_id, None)
                self._siblings.discard(out.request_id)
                continue
            n = len(out.token_ids)
            if n:
                if entry.last_token is None:
                    entry.children.ttft.observe(now - entry.arrival)
                    entry.first_token = now
                else:  # several tokens in one delta (merged): split the gap between them
                    gap = (now - entry.last_token) / n
                    for _ in range(n):
                        entry.children.itl.observe(gap)
                entry.last_token = now
            if out.finished:
                del self._live[out.request_id]
                self._finish(entry, out, now)
                if self.log_requests:
                    log_finished(out, entry, now)

    def _finish(self, entry: _Live, out: RequestOutput, now: float) -> None:
        c = entry.children
        c.e2e.observe(now - entry.arrival)
        c.queue.observe(max(entry.scheduled - entry.arrival, 0.0))
        usage = out.usage
        c.generation.inc(usage.completion_tokens)
        version = self._version_cap(self._versions.pop(out.request_id, NONE))
        if out.request_id in self._siblings:  # its prompt was counted with its leader
            self._siblings.discard(out.request_id)
        else:
            self._count_prompt(entry, version, usage)
        key = (entry.tenant, entry.priority, out.finish_reason or "unknown")
        counter = self._finish_children.get(key)
        if counter is None:
            counter = self._finish_children[key] = self.requests.labels(entry.tenant, self.model, *key[1:])
        counter.inc()

    def _count_prompt(self, entry: _Live, version: str, usage: Any) -> None:
        """Prompt, cached and prefix-cache tokens of one prompt (once per prompt, not per choice)."""
        entry.children.prompt.inc(usage.prompt_tokens)
        entry.children.cached.inc(usage.cached_tokens)
        pc = self._pc_children.get((entry.tenant, version))
        if pc is None:
            pc = self._pc_children[(entry.tenant, version)] = (
                self.pc_queries.labels(entry.tenant, self.model, version),
                self.pc_hits.labels(entry.tenant, self.model, version),
            )
        pc[0].inc(usage.prompt_tokens)
        pc[1].inc(usage.cached_tokens)


def log_finished(out: RequestOutput, entry: _Live, now: float) -> None:
    """The engine server's request line: ids, tenant, tokens and times; never the prompt or output."""
    ttft = "-" if entry.first_token is None else f"{(entry.first_token - entry.arrival) * 1000:.1f}"
    usage = out.usage
    request_log.info("request %s tenant=%s priority=%s finish=%s prompt_tokens=%d completion_tokens=%d "
                     "cached_tokens=%d queue_ms=%.1f ttft_ms=%s latency_ms=%.1f", out.request_id, entry.who or "-",
                     entry.priority, out.finish_reason or "-", usage.prompt_tokens, usage.completion_tokens,
                     usage.cached_tokens, max(entry.scheduled - entry.arrival, 0.0) * 1000, ttft,
                     (now - entry.arrival) * 1000)


class EngineStatsCollector(Collector):
    """Engine gauges and engine-wide counters, read at scrape time."""

    def __init__(self, engine: AsyncEngine, model: str, tenant_labels: bool = False) -> None:
        self.engine = engine
        self.model = model
        self.tenant_labels = tenant_labels  # the fair queue's per-tenant series (they list the tenants)
        self.fairness = FairnessGauges()

    def collect(self) -> Iterator[Metric]:
        s = self.engine.stats()
        bm = self.engine.block_manager
        labels = [self.model]
        yield from _per_model(GaugeMetricFamily, labels, (
            ("fairgate_requests_running", "Requests with KV blocks, being prefilled or decoded.", s.running),
            ("fairgate_requests_waiting", "Requests waiting for admission (incl. preempted).", s.waiting),
            ("fairgate_kv_blocks_used", "KV-cache blocks referenced by running requests.", s.kv_blocks_used),
            ("fairgate_kv_blocks_total", "KV-cache blocks in the pool.", s.kv_blocks_total),
            ("fairgate_kv_blocks_cached", "Blocks holding a reusable cached prefix.", bm.num_cached_blocks),
            ("fairgate_engine_startup_seconds", "Time to build the engine (model load, KV pool).", s.startup_seconds),
        ))
        yield from _step_cost_gauges(self.engine, labels)
        info = GaugeMetricFamily("fairgate_model_quantization", "Always 1; labels say how the served"
                                 " model's weights and KV cache are stored.", labels=["model", "weights", "kv_cache"])
        info.add_metric([self.model, *quantization_labels(self.engine)], 1)
        yield info
        yield from _preemption_counters(s, self.model)
        yield from self.fairness.collect(self.engine.scheduler.queue, self.model, self.tenant_labels)
        yield from _per_model(CounterMetricFamily, labels, (
            ("fairgate_prefix_cache_evictions", "Cached blocks evicted to make room.", bm.num_evictions),
            ("fairgate_engine_steps", "Engine steps run.", s.steps),
            ("fairgate_engine_busy_seconds", "Time inside the model's forward passes.", s.busy_seconds),
            ("fairgate_engine_sampled_sequences", "Sequences that sampled a token, summed over steps (divided "
             "by steps: the mean batch size).", s.sampled_seqs),
            ("fairgate_spec_drafts", "Speculative verifies run (one per request per step).", s.spec_drafts),
            ("fairgate_spec_draft_tokens", "Draft tokens verified by the target.", s.spec_draft_tokens),
            ("fairgate_spec_accepted_tokens", "Draft tokens the target accepted.", s.spec_accepted_tokens),
            ("fairgate_spec_off_steps", "Steps the speculation off switch ran without drafts.", s.spec_off_steps),
            ("fairgate_spec_propose_seconds", "Time proposing draft tokens.", s.spec_propose_seconds),
            ("fairgate_spec_verify_seconds", "Forward-pass time of steps that verified drafts.", s.spec_verify_seconds),
        ))
        by_pos = CounterMetricFamily(
            "fairgate_spec_accepted_by_position", "Verifies whose draft at this position (1-based) was accepted.",
            labels=["model", "position"],
        )
        for j, count in enumerate(list(s.spec_accepted_by_position)):
            by_pos.add_metric([self.model, str(j + 1)], count)
        yield by_pos


def _preemption_counters(s: EngineStats, model: str) -> Iterator[Metric]:
    """Preemptions and the tokens their resumes recomputed, by cause: "kv" (blocks ran out: KV
    pressure) or "fairness" (a slot given to an under-served tenant: not KV pressure)."""
    for name, help_, total, fair in (
        ("fairgate_preemptions", "Requests preempted (KV dropped, recomputed later), by cause.",
         s.preemptions, s.fairness_preemptions),
        ("fairgate_preemption_recomputed_tokens", "Tokens resumed requests computed again (not found in "
         "the prefix cache), by the cause of their preemption.", s.recomputed_tokens, s.fairness_recomputed_tokens),
    ):
        c = CounterMetricFamily(name, help_, labels=["model", "cause"])
        c.add_metric([model, "kv"], total - fair)
        c.add_metric([model, "fairness"], fair)
        yield c


def _step_cost_gauges(engine: AsyncEngine, labels: list[str]) -> Iterator[Metric]:
    """The measured cost weights (step_cost.py); absent until the engine has run a step of that kind."""
    costs = engine.step_costs()
    return _per_model(GaugeMetricFamily, labels, (
        ("fairgate_engine_prefill_seconds_per_token", "Measured forward-pass seconds per prefill token "
         "(the weight the gateway allocates hardware cost by).", costs.prefill_s_per_token if costs else None),
        ("fairgate_engine_decode_seconds_per_step", "Measured forward-pass seconds per decoded "
         "sequence-step.", costs.decode_s_per_step if costs else None),
    ))


def _per_model(family: type[GaugeMetricFamily] | type[CounterMetricFamily], labels: list[str],
               rows: Iterable[tuple[str, str, float | None]]) -> Iterator[Metric]:
    """One `family` per (name, help, value) row, each with its one series labelled by the model
    (`labels`); a row whose value is None (not measured yet) is left out."""
    for name, help_, value in rows:
        if value is not None:
            f = family(name, help_, labels=["model"])
            f.add_metric(labels, value)
            yield f


def quantization_labels(engine: AsyncEngine) -> tuple[str, str]:
    """(weights, kv_cache) as the model list and metrics show them, e.g. ("int8", "float32")."""
    runner = engine.runner
    weights = getattr(runner, "quantization_name", "none")
    kv = getattr(runner, "kv_cache_name", None) or str(getattr(runner, "kv_cache_dtype", "")).removeprefix("torch.")
    return weights, kv


def install(engine: AsyncEngine, registry: CollectorRegistry, model: str,
            requests: bool = True, tenant_labels: bool = False) -> EngineRequestMetrics | None:
    """Register `engine`'s metrics in `registry`. With `requests` the per-request histograms too
    (the engine server); without, only the engine gauges (an engine embedded in the gateway,
    whose own histograms cover the requests)."""
    registry.register(EngineStatsCollector(engine, model, tenant_labels))
    if not requests:
        return None
    metrics = EngineRequestMetrics(registry, model)
    engine.observer = metrics
    return metrics


class ServerMetrics:
    """What the engine server mounts: its own registry, the engine's hooks and `GET /metrics`.

    Who may scrape is `access` (backends/metrics_access.py; default from FAIRGATE_METRICS_*):
    the metrics token or the engine's API key. An engine without an API key trusts every
    loopback caller (server_auth.py) and so serves /metrics to them too unless a token is set.
    """

    def __init__(self, engine: AsyncEngine, model: str, access: MetricsAccess | None = None,
                 api_key: str | None = None) -> None:
        access = access or MetricsAccess.from_env()
        if api_key is None and access.token is None:
            access = MetricsAccess(None, True, access.tenant_labels)
        self.access = access
        self.api_key = api_key
        self.registry = CollectorRegistry()
        self.requests = install(engine, self.registry, model, tenant_labels=access.tenant_labels)
        if self.requests is not None:
            self.requests.tenant_labels = access.tenant_labels

    def tag(self, request_id: str, version_header: str | None, body: Any,
            choices: Sequence[tuple[str, bool]] = ()) -> None:
        """Label the request's prefix-cache counters with its prompt version; `choices` are the
        engine ids of a request with several choices (`choices.choice_ids`)."""
        if self.requests is None:
            return
        version = prompt_version(version_header, body)
        if len(choices) > 1:
            self.requests.set_choices(choices, version)
        else:
            self.requests.set_prompt_version(request_id, version)

    async def endpoint(self, request: Request) -> Response:
        return metrics_response(self.registry, self.access, request.headers.get("authorization"), (self.api_key,))
