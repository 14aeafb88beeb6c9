"""The fair waiting queue: weighted Virtual Token Counter per tenant inside priority classes.

Within a class (`SchedRequest.priority`, rank 0 = highest) every tenant has a counter of the
service it received, in cost units divided by its weight (VTC, Sheng et al., OSDI 2024). The
queue admits the head request of the backlogged tenant (one with waiting requests) whose
counter is least, so backlogged tenants' weighted service never drifts far apart. A tenant
that becomes backlogged again has its counter lifted to the least counter among the backlogged
tenants, so idle time is not banked as credit; one served within the last `active_window_s` (it
was not idle, it asks for less than its share) is lifted to no more than a bounded `active_lead`
below it (`FairnessConfig`). The queue is work-conserving: whenever anything waits, `peek` returns
something.

Charging happens when work is scheduled, not when a request is admitted: `on_prefill` charges
input tokens × w_in / weight for each prefill chunk (chunked prefill spreads the charge over
several steps; a prefix-cache hit is never scheduled and so never charged), `on_decode`
charges w_out / weight per generated token. The planner passes only prompt tokens computed
for the first time, so recomputing a preempted request's KV costs its tenant nothing extra:
the preemption was the engine's decision, not the tenant's demand. The VTC bound then holds
with L_in = the longest prompt (or the prefill chunk cap, whichever is smaller).

A class with a TTFT objective (`FairnessConfig.ttft_objectives`) lets a request about to miss
it go first among the tenants whose counters are within `deadline_slack` of the least: earliest
arrival first, so the bound above grows by that slack and no more (`deadline_picks` counts the
admissions that went against the counters' order this way).

Across classes the highest class with waiting requests goes first, except that a lower class
with a reserved share that it has not received lately is admitted first (see
`FairnessConfig`), so no class starves. Preemption picks the lowest class, then the tenant
with the largest counter, then the newest request.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from fairgate.scheduler.fairness import FairnessConfig, FairnessWeights, is_stale
from fairgate.scheduler.request import SchedRequest


@dataclass(slots=True)
class FairQueueStats:
    """A read-only copy of the queue's fairness state, for tests and metrics."""

    version: int
    default_weight: float
    weights: dict[str, float]
    counters: dict[tuple[int, str], float]  # (priority rank, tenant) -> weighted service
    class_credit: dict[int, float]  # rank -> banked reserved share (cost units), lower classes
    waiting: dict[tuple[int, str], int]  # (priority rank, tenant) -> waiting requests
    served: dict[str, float]  # tenant -> service received so far (cost units, not weighted), every class


class FairQueue:
    """`WaitQueue` (scheduler/queue.py) with weighted VTC and priority classes."""

    def __init__(
        self, config: FairnessConfig | None = None, weights: FairnessWeights | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`clock`: the time `SchedRequest.arrival_time` is on (a simulation passes its own)."""
        self.config = config or FairnessConfig()
        self._clock = clock
        self.deadline_picks = 0  # admissions a TTFT objective moved ahead of the counters' order
        self._weights = weights or FairnessWeights()
        # rank -> tenant -> its waiting requests in arrival order; only non-empty deques are
        # kept, so a tenant is backlogged in a class exactly when it has a key there
        self._waiting: dict[int, dict[str, deque[SchedRequest]]] = {}
        self._index: dict[str, SchedRequest] = {}
        self._counters: dict[tuple[int, str], float] = {}
        self._last_left: dict[int, float] = {}  # rank -> counter of the last tenant to leave
        self._credit: dict[int, float] = {}  # rank -> reserved-share credit, lower classes
        self._served: dict[str, float] = {}  # tenant -> service received (metrics: rates, Jain's index)
        self._last_served: dict[tuple[int, str], float] = {}  # (rank, tenant) -> clock at its last charge

    # ---- weights -------------------------------------------------------------------------

    def set_weights(
        self, weights: Mapping[str, float], version: int | None = None, default_weight: float = 1.0
    ) -> bool:
        """Replace all weights. `version` None means "current + 1". A version older than the
        current one is a stale push and is ignored (returns False); the same version is
        accepted again, so a re-push after an engine reconnect is harmless."""
        if version is None:
            version = self._weights.version + 1
        return self.apply_weights(FairnessWeights(weights, version, default_weight))

    def apply_weights(self, weights: FairnessWeights) -> bool:
        """Use `weights` from the next admission on; False (and no change) when stale."""
        if is_stale(weights.version, self._weights.version):
            return False
        # counters stay: they are past service already divided by the weight of the time,
        # so a new weight only changes how fast each tenant's counter grows from now on
        self._weights = weights
        return True

    @property
    def weights(self) -> FairnessWeights:
        return self._weights

    @property
    def version(self) -> int:
        return self._weights.version

    def weight_of(self, tenant: str) -> float:
        return self._weights.weight_of(tenant)

    def counter(self, tenant: str, priority: int = 1) -> float:
        return self._counters.get((priority, tenant), 0.0)

    def is_owed(self, priority: int) -> bool:
        """Whether a lower class has reserved share banked (it is admitted ahead of a higher
        class until that credit is spent)."""
        return self._credit.get(priority, 0.0) > 0.0

    def backlogged(self, priority: int = 1) -> list[str]:
        """Tenants with waiting requests in a class, least counter first."""
        tenants = self._waiting.get(priority, {})
        return sorted(tenants, key=lambda t: (self.counter(t, priority), t))

    def stats(self) -> FairQueueStats:
        return FairQueueStats(
            version=self._weights.version,
            default_weight=self._weights.default_weight,
            weights=dict(self._weights.weights),
            counters=dict(self._counters),
            class_credit=dict(self._credit),
            waiting={(r, t): len(q) for r, ts in self._waiting.items() for t, q in ts.items()},
            served=dict(self._served),
        )

    # ---- the WaitQueue protocol ----------------------------------------------------------

    def push(self, request: SchedRequest) -> None:
        self._enqueue(request, front=False)

    def push_front(self, request: SchedRequest) -> None:
        """A preempted request goes back to the head of its tenant's line."""
        self._enqueue(request, front=True)

    def peek(self) -> SchedRequest | None:
        pick = self._select()
        if pick is None:
            return None
        rank, tenant, _ = pick
        return self._waiting[rank][tenant][0]

    def pop(self) -> SchedRequest:
        pick = self._select()
        if pick is None:
            raise IndexError("pop from an empty FairQueue")
        rank, tenant, by_deadline = pick
        self.deadline_picks += by_deadline
        request = self._waiting[rank][tenant].popleft()
        self._forget(request)
        return request

    def remove(self, request_id: str) -> SchedRequest | None:
        request = self._index.get(request_id)
        if request is None:
            return None
        self._waiting[request.priority][request.tenant].remove(request)
        self._forget(request)
        return request

    def __len__(self) -> int:
        return len(self._index)

    def on_prefill(self, request: SchedRequest, num_tokens: int) -> None:
        """Charge `num_tokens` prompt tokens scheduled for the first time."""
        if num_tokens > 0:
            self._charge(request, num_tokens * self.config.input_weight)

    def on_decode(self, request: SchedRequest, num_tokens: int) -> None:
        if num_tokens > 0:
            self._charge(request, num_tokens * self.config.output_weight)

    def service_key(self, request: SchedRequest) -> tuple[int, float]:
        """Higher class first, then the tenant with the least weighted service: the order in
        which the planner gives running prefill chunks the step's token budget."""
        return request.priority, self.counter(request.tenant, request.priority)

    def choose_victim(self, running: list[SchedRequest]) -> SchedRequest:
        """Lowest class first, then the most-served tenant, then the newest request (the
        least work lost)."""
        return max(
            running,
            key=lambda r: (r.priority, self.counter(r.tenant, r.priority), r.arrival_time),
        )

    # ---- internals -----------------------------------------------------------------------

    def _enqueue(self, request: SchedRequest, front: bool) -> None:
        if request.request_id in self._index:
            raise ValueError(f"request {request.request_id!r} is already waiting")
        rank, tenant = request.priority, request.tenant
        tenants = self._waiting.setdefault(rank, {})
        line = tenants.get(tenant)
        if line is None:
            self._lift(rank, tenant)
            line = tenants[tenant] = deque()
        if front:
            line.appendleft(request)
        else:
            line.append(request)
        self._index[request.request_id] = request

    def _lift(self, rank: int, tenant: str) -> None:
        """A tenant becoming backlogged starts no lower than the least backlogged counter (or,
        with nobody backlogged, the counter of the last tenant that left); one served within
        the last `active_window_s`, no lower than `active_lead` (over its weight) below that."""
        others = [self.counter(t, rank) for t in self._waiting.get(rank, {})]
        floor = min(others) if others else self._last_left.get(rank, 0.0)
        key = (rank, tenant)
        served = self._last_served.get(key)
        if served is not None and self._clock() - served <= self.config.active_window_s:
            floor -= self.config.active_lead / self.weight_of(tenant)
        self._counters[key] = max(self._counters.get(key, 0.0), floor)

    def _forget(self, request: SchedRequest) -> None:
        del self._index[request.request_id]
        rank, tenant = request.priority, request.tenant
        tenants = self._waiting[rank]
        if not tenants[tenant]:
            del tenants[tenant]
            self._last_left[rank] = self.counter(tenant, rank)
            if not tenants:
                del self._waiting[rank]

    def _select(self) -> tuple[int, str, bool] | None:
        """(class, tenant, whether a TTFT objective chose it against the counters' order)."""
        if not self._waiting:
            return None
        rank = self._pick_class()
        tenants = self._waiting[rank]
        # Least counter. Ties are common right after a lift (a returning tenant starts level
        # with the least backlogged one): they go to the shorter line, so a light tenant does
        # not wait a turn behind a flooder's backlog; then to the earliest head, then by name
        # so the order never depends on dict insertion history.
        tenant = min(
            tenants,
            key=lambda t: (
                self.counter(t, rank), len(tenants[t]), tenants[t][0].arrival_time, t
            ),
        )
        objective = self.config.ttft_objectives.get(rank)
        if objective is None or len(tenants) < 2:
            return rank, tenant, False
        due = self._due(rank, tenants, self.counter(tenant, rank), objective)
        return (rank, tenant, False) if due is None or due == tenant else (rank, due, True)

    def _due(self, rank: int, tenants: dict[str, deque[SchedRequest]], least: float,
             objective: float) -> str | None:
        """The tenant whose head request is due (waited `due_fraction` of the objective, no
        token yet) and arrived first, among those within `deadline_slack` of the `least` counter."""
        cutoff = self._clock() - self.config.due_fraction * objective
        ceiling = least + self.config.deadline_slack
        best: tuple[float, str] | None = None
        for t, line in tenants.items():
            head = line[0]
            if head.arrival_time <= cutoff and not head.output_token_ids and self.counter(t, rank) <= ceiling:
                best = min(best or (head.arrival_time, t), (head.arrival_time, t))
        return best[1] if best else None

    def _pick_class(self) -> int:
        ranks = sorted(self._waiting)
        owed = [r for r in ranks[1:] if self._credit.get(r, 0.0) > 0.0]
        if owed:
            # the class owed the most goes first; ties to the higher class
            return max(owed, key=lambda r: (self._credit[r], -r))
        return ranks[0]

    def _charge(self, request: SchedRequest, cost: float) -> None:
        rank, tenant = request.priority, request.tenant
        key = (rank, tenant)
        self._counters[key] = self._counters.get(key, 0.0) + cost / self.weight_of(tenant)
        self._last_served[key] = self._clock()
        self._served[tenant] = self._served.get(tenant, 0.0) + cost
        self._account_classes(rank, cost)

    def _account_classes(self, rank: int, cost: float) -> None:
        """Reserved shares: while a lower class waits behind a higher one, every unit of
        service (to anyone) earns it `share` units of credit, and service it receives spends
        credit. Positive credit gets it admitted ahead of the higher class."""
        if len(self._waiting) < 2:
            return  # no contention between classes: service is free, nothing is owed
        top = min(self._waiting)
        burst = self.config.class_burst
        for r in self._waiting:
            share = self.config.reserved_shares.get(r, 0.0)
            if r == top or share <= 0.0:
                continue
            credit = self._credit.get(r, 0.0) + share * cost - (cost if r == rank else 0.0)
            self._credit[r] = max(-burst, min(burst, credit))
