"""How many engine replicas each hour of the day needs, from the load over the day.

Demand: the busiest minute of each hour of the day (UTC, the busiest over all days in the
window), in tokens per second. Capacity: what one replica serves per second while busy
(measured: tokens over engine busy time, or given). A replica takes `startup_s` to become
ready, so the buffer covers the largest rise of the load seen within one start-up time (at
least `min_buffer`), and each hour's replicas must be started `startup_s` before the hour.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

MINUTES_PER_DAY = 1440


@dataclass(slots=True)
class ReplicaPlan:
    replicas_by_hour: list[int]  # index = hour of day, UTC
    peak_tokens_per_s_by_hour: list[float]
    buffer: float  # the headroom applied, e.g. 0.25
    capacity_tokens_per_s: float
    startup_s: float


def peaks_by_hour(tokens_by_minute: Mapping[int, int]) -> list[float]:
    """Busiest minute of each hour of day in tokens/s; keys are epoch minutes (UTC)."""
    peaks = [0.0] * 24
    for minute, tokens in tokens_by_minute.items():
        hour = (minute % MINUTES_PER_DAY) // 60
        peaks[hour] = max(peaks[hour], tokens / 60)
    return peaks


def startup_rise(tokens_by_minute: Mapping[int, int], startup_s: float) -> float:
    """The largest relative rise of the per-minute load within one start-up time (0 if none):
    what the running replicas must absorb while a new one starts."""
    span = max(1, math.ceil(startup_s / 60))
    rise = 0.0
    for minute, tokens in tokens_by_minute.items():
        if tokens <= 0:
            continue
        later = max(tokens_by_minute.get(minute + k, 0) for k in range(1, span + 1))
        rise = max(rise, later / tokens - 1)
    return rise


def plan_replicas(tokens_by_minute: Mapping[int, int], capacity_tokens_per_s: float, startup_s: float,
                  min_buffer: float = 0.2, max_buffer: float = 1.0) -> ReplicaPlan:
    """Replicas per hour of day: ceil(peak x (1 + buffer) / capacity), at least 1."""
    peaks = peaks_by_hour(tokens_by_minute)
    buffer = min(max_buffer, max(min_buffer, startup_rise(tokens_by_minute, startup_s)))
    cap = max(capacity_tokens_per_s, 1e-9)
    replicas = [max(1, math.ceil(round(p * (1 + buffer) / cap, 6))) for p in peaks]
    return ReplicaPlan(replicas, [round(p, 3) for p in peaks], round(buffer, 4), round(capacity_tokens_per_s, 3),
                       startup_s)
