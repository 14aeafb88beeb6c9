"""The waiting queue the planner admits from. FCFS here; the fair queue plugs in at this seam."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Protocol

from fairgate.scheduler.request import SchedRequest


class WaitQueue(Protocol):
    """Order in which waiting (and preempted) requests are admitted.

    The planner calls `peek()` to see who is next, `pop()` once it admitted that request,
    `push_front()` for a preempted request (it keeps its place), and the `on_*` hooks so a
    fair queue can charge service. `service_key()` orders running prefill chunks within a
    step's budget (least-served first; equal keys keep admission order). `remove()` drops an
    aborted request. `set_weights()` takes the gateway's per-tenant fairness weights (a queue
    without weights ignores them).
    """

    def push(self, request: SchedRequest) -> None: ...
    def push_front(self, request: SchedRequest) -> None: ...
    def peek(self) -> SchedRequest | None: ...
    def pop(self) -> SchedRequest: ...
    def remove(self, request_id: str) -> SchedRequest | None: ...
    def __len__(self) -> int: ...
    def on_prefill(self, request: SchedRequest, num_tokens: int) -> None: ...
    def on_decode(self, request: SchedRequest, num_tokens: int) -> None: ...
    def choose_victim(self, running: list[SchedRequest]) -> SchedRequest: ...
    def service_key(self, request: SchedRequest) -> tuple[int, float]: ...
    def set_weights(self, weights: Mapping[str, float], version: int | None = None) -> bool: ...


class FCFSQueue:
    """First come, first served. Preempted requests go back to the front."""

    def __init__(self) -> None:
        self._queue: deque[SchedRequest] = deque()

    def push(self, request: SchedRequest) -> None:
        self._queue.append(request)

    def push_front(self, request: SchedRequest) -> None:
        self._queue.appendleft(request)

    def peek(self) -> SchedRequest | None:
        return self._queue[0] if self._queue else None

    def pop(self) -> SchedRequest:
        return self._queue.popleft()

    def remove(self, request_id: str) -> SchedRequest | None:
        for request in self._queue:
            if request.request_id == request_id:
                self._queue.remove(request)
                return request
        return None

    def __len__(self) -> int:
        return len(self._queue)

    def on_prefill(self, request: SchedRequest, num_tokens: int) -> None:
        pass

    def on_decode(self, request: SchedRequest, num_tokens: int) -> None:
        pass

    def choose_victim(self, running: list[SchedRequest]) -> SchedRequest:
        """Preempt from the lowest class first, then the most recently arrived."""
        return max(running, key=lambda r: (r.priority, r.arrival_time))

    def service_key(self, request: SchedRequest) -> tuple[int, float]:
        """No counters: every request is equal, prefill chunks keep admission order."""
        return 0, 0.0

    def set_weights(self, weights: Mapping[str, float], version: int | None = None) -> bool:
        """FCFS has no weights: accepted and ignored."""
        return True
