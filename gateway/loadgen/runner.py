"""Drive the load: for each load point, each target in turn, a duration or a request count.

A load point is either a fixed concurrency (closed loop: `c` workers, each sends its next
request when the last one ended) or a Poisson arrival rate (open loop: requests start at
exponentially spaced times whatever the server does, as vLLM's `benchmark_serving --request-rate`
does; `inf` sends them all at once). With several targets every load point is split into
`rounds` slices run in alternating order (A B, B A, ...), so drift in the machine's other load
falls on every target alike. Target `k` and level `j` send the same request sequence to every
target; levels use disjoint sequences, so one level's prompts never warm another's cache.

The flood scenario (`--scenario flood`, issue 36) has two load points: `alone`, the light
tenant (tenant 0) arriving at its rate by itself, and `flood`, the same light arrivals with a
second tenant (tenant 1) arriving at `flood` requests/s beside it. How much the light tenant's
TTFT grows between the two is what fair scheduling is for (flood.py sums it up).
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import openai

from fairgate.gateway.loadgen.client import RequestResult, Target, send_chat
from fairgate.gateway.loadgen.workloads import WorkloadSource

LEVEL_STRIDE = 1_000_000  # spec indices of level j start at j * LEVEL_STRIDE


@dataclass(slots=True, frozen=True)
class LoadLevel:
    kind: str  # "concurrency" | "rate" | "alone" | "flood" (the flood scenario's two phases)
    value: float  # workers, or requests/s (in the flood scenario: the light tenant's)
    flood: float = 0.0  # "flood": the flooding tenant's requests/s

    @property
    def label(self) -> str:
        if self.kind == "concurrency":
            return f"c={self.value:g}"
        if self.kind == "alone":
            return "alone"
        if self.kind == "flood":
            return f"flood={self.flood:g}"
        return f"rate={self.value:g}"


@dataclass(slots=True)
class RunPlan:
    """Everything a run needs besides the targets and keys."""

    levels: list[LoadLevel]
    source: WorkloadSource
    requests: int | None = None  # per (target, level); or
    duration: float | None = None  # seconds per (target, level)
    rounds: int = 1
    max_concurrency: int | None = None  # a cap on in-flight requests in rate mode
    warmup: int = 1  # unmeasured requests per target first (connections, first-call costs)
    seed: int = 0
    temperature: float | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    fit: dict[str, Any] | None = None  # how the workload was fitted to the served context (fit.py)


@dataclass(slots=True)
class RunOutcome:
    results: list[RequestResult]
    seconds: dict[tuple[str, str], float]  # (target, level) → wall time under load
    sent: dict[tuple[str, str], int]
    client: dict[str, float] = field(default_factory=dict)  # the load generator's own CPU and wall time
    interrupted: bool = False  # stopped by Ctrl-C: the figures cover what ran


def slices(total: float | int | None, rounds: int) -> list[Any]:
    """Split a budget into `rounds` parts (counts stay whole, remainder first)."""
    if total is None:
        return [None] * rounds
    if isinstance(total, int):
        return [total // rounds + (1 if r < total % rounds else 0) for r in range(rounds)]
    return [total / rounds] * rounds


def schedule(targets: list[Target], plan: RunPlan) -> Iterator[tuple[int, LoadLevel, int, Any, Any]]:
    """(target index, level, round, request slice, duration slice) in run order."""
    req_slices, dur_slices = slices(plan.requests, plan.rounds), slices(plan.duration, plan.rounds)
    for level in plan.levels:
        for r in range(plan.rounds):
            order = range(len(targets)) if r % 2 == 0 else reversed(range(len(targets)))
            for t in order:
                yield t, level, r, req_slices[r], dur_slices[r]


class Cell:
    """One slice: `count` requests or `duration` seconds of one target at one load point."""

    def __init__(self, runner: LoadRunner, t: int, level: LoadLevel, first: int,
                 count: int | None, duration: float | None) -> None:
        self.runner, self.t, self.level = runner, t, level
        self.next, self.count, self.sent = first, count, 0
        self.deadline = None if duration is None else time.perf_counter() + duration

    def take(self) -> int | None:
        """The next spec index, or None when the budget is spent or the run is stopping."""
        if self.runner.stopping:
            return None
        if self.count is not None and self.sent >= self.count:
            return None
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            return None
        self.sent += 1
        self.next += 1
        return self.next - 1

    async def run(self) -> None:
        if self.level.kind == "concurrency":
            await asyncio.gather(*(self._worker() for _ in range(int(self.level.value))))
        elif self.level.kind == "alone":
            await self._arrivals(self.level.value, tenant=0)
        elif self.level.kind == "flood":
            await asyncio.gather(self._arrivals(self.level.value, tenant=0),
                                 self._arrivals(self.level.flood, tenant=1))
        else:
            await self._arrivals(self.level.value)

    async def _worker(self) -> None:
        while (i := self.take()) is not None:
            await self.runner.send(self.t, self.level, i)

    async def _arrivals(self, rate: float, tenant: int | None = None) -> None:
        """Poisson arrivals at `rate` (requests of `tenant`, or each index's own tenant)."""
        # the same arrival times for every target at this level and round: like meets like
        rng = random.Random(f"{self.runner.plan.seed}:{self.level.label}:{self.next}:{tenant}")
        cap = self.runner.plan.max_concurrency
        gate = asyncio.Semaphore(cap) if cap else None
        tasks = []
        while (i := self.take()) is not None:
            tasks.append(asyncio.create_task(self._gated(gate, i, tenant)))
            if math.isfinite(rate):
                await asyncio.sleep(rng.expovariate(rate))
        await asyncio.gather(*tasks)

    async def _gated(self, gate: asyncio.Semaphore | None, i: int, tenant: int | None) -> None:
        if gate is None:
            await self.runner.send(self.t, self.level, i, tenant)
            return
        async with gate:
            await self.runner.send(self.t, self.level, i, tenant)


class LoadRunner:
    """Runs a plan against targets. Request i belongs to tenant i mod `tenants` (default: one per
    API key) and uses key `tenant mod len(keys)`; with `named_tenants` it also names its tenant in
    an `x-tenant: bench-<n>` header (how a trusted front talks to `fairgate engine` or vLLM-style
    servers; one key is then enough)."""

    def __init__(self, targets: list[Target], keys: list[str], plan: RunPlan, timeout: float = 600.0,
                 headers: dict[str, str] | None = None, progress: Any = None,
                 tenants: int | None = None, named_tenants: bool = False) -> None:
        self.targets, self.keys, self.plan = targets, keys, plan
        self.tenants, self.named_tenants = tenants or len(keys), named_tenants
        self.clients = [[openai.AsyncOpenAI(base_url=t.base_url, api_key=k, max_retries=0, timeout=timeout,
                                            default_headers=headers or None) for k in keys] for t in targets]
        self.progress = progress  # a tqdm bar (or anything with update/set_postfix_str), optional
        self.results: list[RequestResult] = []
        self.errors = 0
        self.stopping = False  # set by Ctrl-C: cells take no new request
        self.t0 = time.perf_counter()

    async def send(self, t: int, level: LoadLevel, i: int, tenant: int | None = None) -> None:
        tenant = i % self.tenants if tenant is None else tenant
        spec = self.plan.source.spec(i)
        result = RequestResult(self.targets[t].label, level.label, tenant, spec.workload,
                               start=time.perf_counter() - self.t0)
        self.results.append(result)  # appended before it runs: an interrupted run still counts it
        await send_chat(self.clients[t][tenant % len(self.keys)], self.targets[t], spec, result,
                        extra_body=self.plan.extra_body, temperature=self.plan.temperature,
                        headers={"x-tenant": f"bench-{tenant}"} if self.named_tenants else None)
        self.errors += result.error is not None
        if self.progress is not None:
            self.progress.set_postfix_str(f"{self.targets[t].label} {level.label} errors={self.errors}",
                                          refresh=False)
            self.progress.update(1)

    async def warm_up(self) -> None:
        """`plan.warmup` requests per target, one at a time, from their own index range; not kept."""
        first = len(self.plan.levels) * LEVEL_STRIDE
        for t, target in enumerate(self.targets):
            for k in range(self.plan.warmup):
                spec = self.plan.source.spec(first + k)
                await send_chat(self.clients[t][0], target, spec, RequestResult(target.label, "warmup", 0,
                                spec.workload, 0.0), extra_body=self.plan.extra_body,
                                temperature=self.plan.temperature)

    async def run(self) -> RunOutcome:
        await self.warm_up()
        self.t0 = time.perf_counter()
        seconds: dict[tuple[str, str], float] = {}
        sent: dict[tuple[str, str], int] = {}
        offsets: dict[tuple[int, str], int] = {}
        for j, level in enumerate(self.plan.levels):
            for t in range(len(self.targets)):
                offsets[(t, level.label)] = j * LEVEL_STRIDE
        interrupted = False
        for t, level, _round, count, duration in schedule(self.targets, self.plan):
            key = (self.targets[t].label, level.label)
            cell = Cell(self, t, level, offsets[(t, level.label)], count, duration)
            started = time.perf_counter()
            running = asyncio.ensure_future(cell.run())
            try:
                await asyncio.shield(running)
            except asyncio.CancelledError:  # Ctrl-C: stop, and report what was measured so far
                interrupted = True
                # A request whose client swallowed the cancel must not go on to take the next
                # one (the cell would then run out its whole duration): no new request from here.
                self.stopping = True
                running.cancel()
                await asyncio.gather(running, return_exceptions=True)
            seconds[key] = seconds.get(key, 0.0) + time.perf_counter() - started
            sent[key] = sent.get(key, 0) + cell.sent
            offsets[(t, level.label)] = cell.next
            if interrupted:
                self._uncancel()
                break
        return RunOutcome(self.results, seconds, sent, interrupted=interrupted)

    def _uncancel(self) -> None:
        """Mark the requests cut off in flight, and let the report's own awaits run."""
        for r in self.results:
            if not r.ok and r.error is None:
                r.error = "cancelled"
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()

    async def aclose(self) -> None:
        for row in self.clients:
            for client in row:
                await client.close()
