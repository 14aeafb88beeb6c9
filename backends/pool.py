"""A pool of engine replicas serving one model, as one `Backend`.

The gateway routes a request to the pool; the pool picks the replica (backends/pool_routing.py:
prefix affinity bounded by load), counts it outstanding while it runs, and fails over to the
next replica in the choice's order when one cannot take it before the first byte (after that
the stream ends with the replica's error, as for any backend). A `ReplicaProbe` task reads
every replica's health and KV usage every `probe_interval_s`: a replica that fails
`eject_after` probes in a row — or any request on a dead connection — is ejected (no new
requests) and re-admitted after `readmit_after` good probes in a row. A draining replica gets no
new requests; its in-flight ones finish (`wait_idle`), then the admin removes it.

State lives per gateway process (outstanding counts, health); what the fleet shares is the
configuration (which replicas, which are draining) in the database, and with a fair queue
(`fair_slots`) and a `ledger` its slots and per-tenant counters (pool_fleet_gate.py, in Redis).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fairgate.backends.base import (
    Backend,
    BackendError,
    Capabilities,
    Chunk,
    GenerationRequest,
    TokenDecoder,
)
from fairgate.backends.pool_fleet_gate import FleetGate, GateLedger
from fairgate.backends.pool_gate import FairGate
from fairgate.backends.pool_load import LoadReading, read_load
from fairgate.backends.pool_prefix import PrefixKeyer
from fairgate.backends.pool_routing import Policy, PoolChoice, ReplicaLoad, choose
from fairgate.scheduler.fairness import DEFAULT_ACTIVE_LEAD

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("fairgate.pool")
DEAD_STATUSES = frozenset({502, 504})  # unreachable / timed out: the replica, not the request


@dataclass(slots=True, frozen=True)
class ReplicaSpec:
    """One replica as configured. `draining`: no new requests."""

    name: str
    base_url: str
    api_key: str | None = field(default=None, repr=False)
    draining: bool = False


@dataclass(slots=True)
class PoolOptions:
    policy: Policy = "affinity"
    load_factor: float = 1.25  # affinity holds while outstanding < factor × mean (+1)
    max_kv_usage: float = 0.9  # a replica fuller than this gives way
    load_slack: int = 4  # ... and affinity holds while within this many of the least loaded
    probe_interval_s: float = 1.0
    probe_timeout_s: float = 1.0
    eject_after: int = 2  # failed probes in a row
    readmit_after: int = 2  # good probes in a row
    # the gateway-side fair queue (backends/pool_gate.py): at most this many requests out per
    # routable replica, the rest wait in weighted-VTC order; None: sent at once
    fair_slots: int | None = None
    # of those, the last this many free slots of the pool go only to a tenant below its weighted
    # share (backends/pool_gate.py's headroom): a light tenant's request need not wait for a flood's
    fair_reserve: int = 0
    # a tenant served within the last second keeps up to this many tokens (over its weight) of its
    # lead when its next request waits, instead of starting level with a flood (pool_gate.FairGate)
    fair_active_lead: float = DEFAULT_ACTIVE_LEAD


@dataclass(slots=True)
class Replica:
    """A replica's live state in this gateway process."""

    spec: ReplicaSpec
    backend: Backend
    outstanding: int = 0
    healthy: bool = True
    kv_usage: float | None = None
    engine_waiting: int | None = None
    queued: int = 0  # waiting at both of the last two probes: the replica's own queue, not a blip
    bad_probes: int = 0
    good_probes: int = 0
    ejections: int = 0
    requests: int = 0
    failures: int = 0
    routed: dict[str, int] = field(default_factory=dict)  # reason → requests sent here first

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def routable(self) -> bool:
        return self.healthy and not self.spec.draining

    def eject(self, why: str) -> None:
        if self.healthy:
            self.healthy, self.ejections, self.good_probes = False, self.ejections + 1, 0
            log.warning("replica %s ejected (%s)", self.name, why)

    def probed(self, reading: LoadReading | None, opts: PoolOptions) -> None:
        if reading is None:
            self.bad_probes, self.good_probes = self.bad_probes + 1, 0
            if self.bad_probes >= opts.eject_after:
                self.eject("health probe failed")
            return
        self.queued = min(reading.waiting or 0, self.engine_waiting or 0)
        self.kv_usage, self.engine_waiting = reading.kv_usage, reading.waiting
        self.bad_probes, self.good_probes = 0, self.good_probes + 1
        if not self.healthy and self.good_probes >= opts.readmit_after:
            self.healthy = True
            log.warning("replica %s re-admitted", self.name)


ReplicaFactory = Callable[[ReplicaSpec], Backend]


class PoolBackend:
    """N replicas of one model behind one name. `make_replica` builds a replica's backend
    (an OpenAICompatBackend or VLLMBackend) from its spec; `kind` ("local" | "vllm") says how
    to read load from it."""

    context_length: int | None = None

    def __init__(self, name: str, kind: str, specs: list[ReplicaSpec], make_replica: ReplicaFactory,
                 http: httpx.AsyncClient, *, model: str | None = None, keyer: PrefixKeyer | None = None,
                 options: PoolOptions | None = None, is_local: bool = True,
                 weight_of: Callable[[str], float] | None = None, ledger: GateLedger | None = None) -> None:
        self.name = name
        self.kind = kind
        self.model = model
        self.is_local = is_local
        self.capabilities = Capabilities(tenant_scheduling=True, cache_salt=True, embeddings=True)
        self.options = options or PoolOptions()
        self.keyer = keyer or PrefixKeyer()
        self._make = make_replica
        self._http = http
        self._counter = itertools.count()
        self.replicas: dict[str, Replica] = {}
        self._probe: asyncio.Task[None] | None = None
        weights = weight_of or (lambda tenant: 1.0)
        # the fair queue's slots and counters: this process's, or the fleet's (`ledger`: Redis)
        lead = self._active_lead
        self.gate: FairGate | FleetGate = (FairGate(self._room, weights, lambda: self.options.fair_reserve,
                                                    active_lead=lead)
                                           if ledger is None
                                           else FleetGate(self._rooms, weights, ledger, active_lead=lead,
                                                          reserve=lambda: self.options.fair_reserve))
        self.update(specs)

    def _active_lead(self) -> float:
        return self.options.fair_active_lead

    breaker = None  # each replica's backend has its own (`status`, the breaker metrics)

    @property
    def model_name(self) -> str | None:
        return self.model

    @property
    def token_decoder(self) -> TokenDecoder | None:
        """The pool's model tokenizer when it has one (its `tokenizer` folder), else None: the
        gateway reads token-id prompts with it (a `backends.base.TokenDecoder`)."""
        return self.keyer.tokenizer

    def __repr__(self) -> str:
        return f"PoolBackend(name={self.name!r}, replicas={list(self.replicas)})"

    def update(self, specs: list[ReplicaSpec]) -> None:
        """Take a new replica list; replicas whose address and key stay keep their live state.
        A removed replica's in-flight requests finish: they hold their replica."""
        old, self.replicas = self.replicas, {}
        for spec in specs:
            kept = old.get(spec.name)
            if kept is not None and (kept.spec.base_url, kept.spec.api_key) == (spec.base_url, spec.api_key):
                kept.spec = spec
                self.replicas[spec.name] = kept
            else:
                self.replicas[spec.name] = Replica(spec, self._make(spec))

    # ------------------------------------------------------------------ routing
    def choice(self, request: GenerationRequest) -> PoolChoice | None:
        live = [r for r in self.replicas.values() if r.routable]
        if not live:
            return None
        loads = [ReplicaLoad(r.name, r.outstanding, r.kv_usage) for r in live]
        key = self.keyer.key(request) if self.options.policy == "affinity" else b""
        return choose(self.options.policy, key, loads, counter=next(self._counter),
                      load_factor=self.options.load_factor, max_kv_usage=self.options.max_kv_usage,
                      load_slack=self.options.load_slack)

    def _order(self, request: GenerationRequest, placed: str | None = None) -> list[Replica]:
        """The replicas to try in order; `placed`: the fleet fair queue's slot is on it, so it
        goes first (reason "fair_queue"), the others stay for fail-over."""
        picked = self.choice(request)
        if picked is None:
            raise BackendError(f"pool {self.name} has no healthy replica", 503, True, code="no_healthy_replica")
        order, reason = list(picked.order), picked.reason
        if placed is not None and placed in order:
            order, reason = [placed, *(n for n in order if n != placed)], "fair_queue"
        first = self.replicas[order[0]]
        first.routed[reason] = first.routed.get(reason, 0) + 1
        return [self.replicas[n] for n in order]

    def _failed(self, replica: Replica, exc: BackendError) -> None:
        replica.failures += 1
        # the replica's backend-wide circuit, not one tenant's back-off ("upstream_backoff")
        if exc.status in DEAD_STATUSES or exc.code == "circuit_open":
            replica.eject(f"request failed with {exc.status}")

    def _room(self) -> int:
        """Requests the pool takes at once under the fair queue: its slots on every routable
        replica whose KV cache is not past `max_kv_usage`, less each one's own queue."""
        return sum(self._rooms().values())

    def _rooms(self) -> dict[str, int]:
        """Each routable replica's room: `fair_slots`, less the requests waiting in the replica's
        own queue (sent by anyone: a request sent into a queue is ordered by the replica's FCFS,
        not by the gateway's counters), counted as the fewer of its last two probes so that a
        request that waits one step before it runs is no queue. Past `max_kv_usage`: none."""
        slots = self.options.fair_slots or 0
        return {r.name: max(0, slots - r.queued) for r in self.replicas.values()
                if r.routable and (r.kv_usage is None or r.kv_usage <= self.options.max_kv_usage)}

    def _slot(self, request: GenerationRequest) -> contextlib.AbstractAsyncContextManager[str | None]:
        """The fair queue's slot (None: off); it yields the replica the slot is on, or None."""
        if self.options.fair_slots is None:
            return contextlib.nullcontext()
        completion = lambda: float(request.used.completion_tokens or 0)  # noqa: E731 - read at the end
        if isinstance(self.gate, FleetGate):
            picked = self.choice(request)  # routing's preference; the fleet's load decides
            return self.gate.slot(request.tenant, request.wire.prompt_tokens_bound, completion,
                                  picked.order[0] if picked is not None else "")
        return self._local_slot(request, completion)

    @contextlib.asynccontextmanager
    async def _local_slot(self, request: GenerationRequest, completion: Callable[[], float]
                          ) -> AsyncGenerator[str | None, None]:
        """This process's fair queue counts the pool's slots; the slot it grants is placed on a
        replica with a free one (routing's choice when it has one), so no replica is sent more
        than its slots while another has room: a request sent past them would wait in that
        replica's own FCFS queue, whatever the counters said."""
        assert isinstance(self.gate, FairGate)
        async with self.gate.slot(request.tenant, request.wire.prompt_tokens_bound, completion):
            yield self._place(request)

    def _place(self, request: GenerationRequest) -> str | None:
        """The replica for a request just let through: the first in routing's order with a free
        slot, else the one with the most room (None: routing decides)."""
        picked, rooms = self.choice(request), self._rooms()
        if picked is None or not rooms:
            return None
        free = {n: room - self.replicas[n].outstanding for n, room in rooms.items()}
        return next((n for n in picked.order if free.get(n, 0) > 0), max(free, key=free.__getitem__))

    async def complete(self, request: GenerationRequest) -> dict[str, Any]:
        async with self._slot(request) as placed:
            return await self._answer(request, lambda b: b.complete(request), placed)

    async def embed(self, request: GenerationRequest) -> dict[str, Any]:
        async with self._slot(request) as placed:
            return await self._answer(request, lambda b: b.embed(request), placed)

    async def _answer(self, request: GenerationRequest, call: Callable[[Backend], Awaitable[dict[str, Any]]],
                      placed: str | None = None) -> dict[str, Any]:
        """The first replica's answer, failing over on a retryable error."""
        last: BackendError | None = None
        for replica in self._order(request, placed):
            replica.outstanding += 1
            replica.requests += 1
            try:
                return await call(replica.backend)
            except BackendError as exc:
                self._failed(replica, exc)
                if not exc.retryable:
                    raise
                last = exc
            finally:
                replica.outstanding -= 1
        assert last is not None
        raise last

    async def stream_batches(self, request: GenerationRequest) -> AsyncGenerator[list[Chunk], None]:
        async with self._slot(request) as placed:
            async for batch in self._stream(request, placed):
                yield batch

    async def _stream(self, request: GenerationRequest, placed: str | None = None
                      ) -> AsyncGenerator[list[Chunk], None]:
        """Fail over until a replica produced its first batch; then stay with it."""
        last: BackendError | None = None
        for replica in self._order(request, placed):
            replica.outstanding += 1
            replica.requests += 1
            stream = replica.backend.stream_batches(request)
            try:
                try:
                    first = await stream.__anext__()
                except StopAsyncIteration:
                    return
                except BackendError as exc:
                    self._failed(replica, exc)
                    if not exc.retryable:
                        raise
                    last = exc
                    continue
                yield first
                try:
                    async for batch in stream:
                        yield batch
                except BackendError as exc:
                    self._failed(replica, exc)
                    raise
                return
            finally:
                await stream.aclose()
                replica.outstanding -= 1
        assert last is not None
        raise last

    async def usage_of(self, request_id: str) -> dict[str, Any] | None:
        """The replica that served `request_id` knows it: asked all at once, the first answer."""
        found = await asyncio.gather(*(r.backend.usage_of(request_id) for r in self.replicas.values()))
        return next((u for u in found if u is not None), None)

    # ------------------------------------------------------------------ health and drain
    def start(self) -> PoolBackend:
        if self._probe is None:
            self._probe = asyncio.get_running_loop().create_task(self._probe_loop(), name=f"pool-probe-{self.name}")
        return self

    async def probe_once(self) -> None:
        replicas = list(self.replicas.values())
        readings = await asyncio.gather(*(read_load(self._http, self.kind, r.spec.base_url,
                                                    self.options.probe_timeout_s) for r in replicas))
        for replica, reading in zip(replicas, readings, strict=True):
            replica.probed(reading, self.options)
        self.gate.wake()  # a replica back, or its KV cache emptier: room for the waiting

    async def _probe_loop(self) -> None:
        while True:
            try:
                await self.probe_once()
            except Exception:  # noqa: BLE001 - one bad round must not end the health checks
                log.exception("pool %s probe round failed", self.name)
            await asyncio.sleep(self.options.probe_interval_s)

    async def wait_idle(self, replica: str, timeout_s: float) -> bool:
        """Wait until this process has nothing in flight on `replica`; False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while (r := self.replicas.get(replica)) is not None and r.outstanding > 0:
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    def status(self) -> list[dict[str, Any]]:
        """Per replica, what this gateway sees (admin and metrics); never the key."""
        return [{"name": r.name, "base_url": r.spec.base_url, "healthy": r.healthy, "draining": r.spec.draining,
                 "outstanding": r.outstanding, "kv_usage": r.kv_usage, "waiting": r.engine_waiting,
                 "requests": r.requests,
                 "failures": r.failures, "ejections": r.ejections, "routed": dict(r.routed),
                 "breaker": r.backend.breaker.snapshot() if r.backend.breaker else None}
                for r in self.replicas.values()]

    async def aclose(self) -> None:
        if isinstance(self.gate, FleetGate):
            await self.gate.aclose()  # its slot releases under way reach the ledger
        if self._probe is not None:
            self._probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probe
            self._probe = None
        for r in self.replicas.values():
            await r.backend.aclose()
