"""The advisor's collector: usage rows and metrics over a window into policies.advice inputs.

`advise_for(source, window)` is the one entry point (the CLI, `GET /admin/advice`, a dashboard
panel): `source` is the running gateway's state (its database and its own /metrics registry,
counters since the process started) or a database URL / SQLAlchemy engine with metrics
scrapes given as text. Two scrapes of the same engine (before, after) give counter deltas over
the window; one scrape gives counters since the engine started.

Usage rows give, per (route, model, backend): tokens, cached tokens, TTFT and decode time of
streamed rows, prompt-head fingerprints and complexity scores. The engines' metrics
(`model` label) give steps, sampled sequences, busy time, preemptions, queue time, KV usage,
the KV cache dtype, speculative drafts and acceptance, and the start-up time.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine, select

from fairgate.gateway.store.tables import UsageRecord, utcnow
from fairgate.policies.advice import (
    ALL_ROUTES,
    TOO_LITTLE_DATA,
    Advice,
    AdviceConfig,
    EngineWindow,
    RouteWindow,
    advise,
    replicas,
)
from fairgate.policies.replica_plan import plan_replicas

if TYPE_CHECKING:
    from fairgate.gateway.observability.state import ObservabilityState

_WINDOW = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
DEFAULT_STARTUP_S = 60.0
_EPOCH = datetime(1970, 1, 1)  # usage rows are stored naive, in UTC


def parse_window(text: str) -> timedelta:
    """'90m', '24h', '7d' → a timedelta; ValueError otherwise."""
    m = _WINDOW.match(text.strip())
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f"window must look like 30m, 24h or 7d, not {text!r}")
    return timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2)])


@dataclass(slots=True)
class _Group:
    window: RouteWindow
    shapes: Counter[str] = field(default_factory=Counter)
    heads: Counter[str] = field(default_factory=Counter)
    shape_heads: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))


_COLUMNS = (UsageRecord.route, UsageRecord.model, UsageRecord.backend, UsageRecord.prompt_tokens,
            UsageRecord.completion_tokens, UsageRecord.cached_tokens, UsageRecord.stream, UsageRecord.ttft_ms,
            UsageRecord.latency_ms, UsageRecord.prefix_hash, UsageRecord.prefix_shape, UsageRecord.complexity,
            UsageRecord.created_at)


def read_usage(db: Engine, since: datetime, until: datetime, cfg: AdviceConfig
               ) -> tuple[list[RouteWindow], dict[str, dict[int, int]]]:
    """Route windows of the answered rows (a backend, HTTP 2xx) in [since, until), and tokens by
    epoch minute per backend."""
    groups: dict[tuple[str, str, str], _Group] = {}
    minutes: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    query = select(*_COLUMNS).where(UsageRecord.created_at >= since, UsageRecord.created_at < until,
                                    UsageRecord.backend.is_not(None), UsageRecord.http_status < 300)
    with db.connect() as conn:
        for row in conn.execute(query):
            key = (row.route or "", row.model, row.backend)
            g = groups.get(key)
            if g is None:
                g = groups[key] = _Group(RouteWindow(*key, requests=0, prompt_tokens=0, completion_tokens=0))
            _add(g, row, cfg)
            minute = int((row.created_at.replace(tzinfo=None) - _EPOCH).total_seconds() // 60)
            minutes[row.backend][minute] += row.prompt_tokens + row.completion_tokens
    return [_finish(g) for g in groups.values()], {k: dict(v) for k, v in minutes.items()}


def _add(g: _Group, row: Any, cfg: AdviceConfig) -> None:
    w = g.window
    w.requests += 1
    w.prompt_tokens += row.prompt_tokens
    w.completion_tokens += row.completion_tokens
    w.cached_tokens += row.cached_tokens or 0
    if row.stream and row.ttft_ms is not None:
        w.streamed += 1
        w.ttft_ms_sum += row.ttft_ms
        w.decode_ms_sum += max(row.latency_ms - row.ttft_ms, 0.0)
    w.latency_ms_sum += row.latency_ms or 0.0
    if row.prefix_shape:
        w.head_requests += 1
        g.shapes[row.prefix_shape] += 1
        g.heads[row.prefix_hash] += 1
        g.shape_heads[row.prefix_shape].add(row.prefix_hash)
    if row.complexity is not None:
        w.scored += 1
        w.simple += row.complexity <= cfg.simple_complexity


def _finish(g: _Group) -> RouteWindow:
    w = g.window
    if g.shapes:
        shape, n = g.shapes.most_common(1)[0]
        w.top_shape_requests, w.top_shape_heads = n, len(g.shape_heads[shape])
        w.top_head_requests = g.heads.most_common(1)[0][1]
    return w


_COUNTERS = {"fairgate_engine_steps": "steps", "fairgate_engine_sampled_sequences": "sampled_seqs",
             "fairgate_engine_busy_seconds": "busy_s", "fairgate_preemptions": "preemptions",
             "fairgate_spec_draft_tokens": "spec_draft_tokens", "fairgate_spec_accepted_tokens":
             "spec_accepted_tokens", "fairgate_queue_time_seconds_sum": "queue_s_sum",
             "fairgate_queue_time_seconds_count": "queue_n"}
_GAUGES = {"fairgate_kv_blocks_used": "kv_blocks_used", "fairgate_kv_blocks_total": "kv_blocks_total",
           "fairgate_requests_waiting": "waiting", "fairgate_engine_startup_seconds": "startup_s",
           "fairgate_fairness_jain_index": "jain", "fairgate_fair_queue_backlogged_tenants": "backlogged_tenants"}


def _samples(texts: Iterable[str], as_model: str | None = None) -> dict[str, dict[str, float]]:
    """model → field → value (counters and gauges summed over the other labels) of scrapes;
    `as_model` files every engine series under that name (a backend's or pool's)."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for text in texts:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                model = s.labels.get("model")
                if model is None:
                    continue
                model = as_model or model
                name = s.name.removesuffix("_total")
                key = _COUNTERS.get(name) or _GAUGES.get(name)
                if s.labels.get("cause") == "fairness":  # a slot given back, not KV pressure
                    key = "fairness_preemptions"
                if name == "fairgate_requests" and "finish_reason" in s.labels:  # the engine's, not the gateway's
                    key = "requests"
                if key is not None:
                    out[model][key] += s.value
                elif name == "fairgate_model_quantization":
                    out[model]["kv:" + s.labels.get("kv_cache", "")] = 1.0
    return out


def engine_windows(after: Sequence[str], before: Sequence[str] = (), as_model: str | None = None
                   ) -> dict[str, EngineWindow]:
    """Engine windows from scrapes at the window's end (and, optionally, at its start)."""
    end, start = _samples(after, as_model), _samples(before, as_model)
    windows: dict[str, EngineWindow] = {}
    for model, values in end.items():
        if "steps" not in values:  # a gateway's own series, not an engine's
            continue
        w = EngineWindow(model)
        for key, v in values.items():
            if key.startswith("kv:"):
                w.kv_cache_dtype = key[3:]
            elif key in _GAUGES.values():
                setattr(w, key, type(getattr(w, key))(v))
            else:  # a counter: the window's share (never below 0: an engine restarted in the window)
                delta = v - start.get(model, {}).get(key, 0.0)
                setattr(w, key, type(getattr(w, key))(max(delta if delta >= 0 else v, 0)))
        windows[model] = w
    return windows


@dataclass(slots=True)
class AdviseOptions:
    window: timedelta = timedelta(hours=24)
    startup_s: float | None = None  # None: the engine's own gauge, else DEFAULT_STARTUP_S
    replica_tokens_per_s: float | None = None  # None: measured (tokens over engine busy time)
    current_replicas: int = 1
    config: AdviceConfig = field(default_factory=AdviceConfig)


def advise_from(db: Engine, after: Sequence[str], before: Sequence[str] = (), opts: AdviseOptions | None = None,
                until: datetime | None = None, by_backend: dict[str, list[str]] | None = None) -> list[Advice]:
    """Advice over the window ending `until` (default now, UTC) from the usage rows in `db`
    and the given metrics scrapes (`by_backend`: scrapes filed under a backend's name)."""
    opts = opts or AdviseOptions()
    until = until or utcnow()
    routes, minutes = read_usage(db, until - opts.window, until, opts.config)
    engines = engine_windows(after, before)
    for name, texts in (by_backend or {}).items():
        engines.update(engine_windows(texts, as_model=name))
    out = advise(routes, engines, opts.config)
    sparse = {a.model for a in out if a.route == ALL_ROUTES and a.finding == TOO_LITTLE_DATA}
    for backend, by_minute in sorted(minutes.items()):
        if backend in sparse:  # a capacity measured over a handful of requests is noise
            continue
        e = engines.get(backend)
        capacity = opts.replica_tokens_per_s
        if capacity is None and e is not None and e.busy_s > 0:
            capacity = sum(by_minute.values()) / e.busy_s
        if not capacity:
            continue  # no measured capacity for this backend (an external API)
        startup = opts.startup_s if opts.startup_s is not None else (
            e.startup_s if e is not None and e.startup_s > 0 else DEFAULT_STARTUP_S)
        plan = plan_replicas(by_minute, capacity, math.ceil(startup))
        out.append(replicas(backend, plan, opts.current_replicas))
    return out


def advise_for(source: ObservabilityState | Engine, window: timedelta | str = "24h", after: Sequence[str] = (),
               before: Sequence[str] = (), opts: AdviseOptions | None = None) -> list[Advice]:
    """Advice over `window` for a running gateway (its database and its own metrics) or a
    database engine with metrics scrapes. Blocking (SQL): call it in a worker thread."""
    opts = opts or AdviseOptions()
    opts.window = parse_window(window) if isinstance(window, str) else window
    if isinstance(source, Engine):
        return advise_from(source, after, before, opts)
    from prometheus_client import generate_latest

    own = generate_latest(source.metrics.registry).decode()
    return advise_from(source.db, [own, *after], before, opts, by_backend=local_engine_scrapes(source))


def local_engine_scrapes(state: ObservabilityState, timeout_s: float = 2.0) -> dict[str, list[str]]:
    """Backend or pool name → the /metrics text of each of its engine servers (kind local),
    read now; an engine that does not answer is left out."""
    import httpx

    from fairgate.backends.pool_load import server_root
    from fairgate.gateway.store.pool_tables import PoolReplicaRow, PoolRow
    from fairgate.gateway.store.tables import BackendRow

    with state.sessions() as s:
        targets = [(b.name, b.base_url) for b in s.scalars(select(BackendRow).where(
            BackendRow.kind == "local", BackendRow.enabled.is_(True)))]
        targets += [(p.name, r.base_url) for p, r in s.execute(select(PoolRow, PoolReplicaRow).join(
            PoolReplicaRow, PoolReplicaRow.pool_id == PoolRow.id).where(PoolRow.kind == "local",
                                                                         PoolRow.enabled.is_(True))).tuples()]
    token = state.settings.metrics_token
    headers = {"authorization": f"Bearer {token}"} if token else {}
    out: dict[str, list[str]] = defaultdict(list)
    with httpx.Client(timeout=timeout_s) as client:
        for name, base in targets:
            try:
                r = client.get(server_root(base) + "/metrics", headers=headers)
            except httpx.HTTPError:
                continue
            if r.status_code == 200:
                out[name].append(r.text)
    return dict(out)


def advice_json(items: Iterable[Advice]) -> list[dict[str, Any]]:
    return [asdict(a) for a in items]
