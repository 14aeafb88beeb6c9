"""What a prefill token and a decode step cost on this engine, measured from its own steps.

Every step the core records the forward pass's wall time with what it ran: `prefill_tokens`
(prompt tokens, recomputed tokens after a preemption, and draft tokens being verified: all
computed in parallel like a prompt) and `decode_steps` (sequences that advanced by one decode
position). Over the last `window` steps the meter fits

    seconds ≈ prefill_tokens × s_prefill + decode_steps × s_decode

by least squares with no intercept, so a step's whole time is attributed to its work (a batch
1 decode step carries the weight reads it cost). Where no step mixed the two kinds, or the fit
is undetermined or comes out negative, the meter uses direct attribution instead: the time of the pure-prefill
steps over their tokens, the time of the pure-decode steps over their sequence-steps; a kind
never seen stays None. The gateway allocates a backend's hardware cost to tenants by these
weights (gateway/billing/cost.py).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

DEFAULT_WINDOW = 2048  # steps


@dataclass(slots=True, frozen=True)
class StepCosts:
    """Measured seconds per prefill token and per decode sequence-step (None: not measured)."""

    prefill_s_per_token: float | None
    decode_s_per_step: float | None
    steps: int  # steps the figures come from
    method: str  # "regression" | "direct"

    def as_dict(self) -> dict[str, Any]:
        return {"prefill_s_per_token": self.prefill_s_per_token, "decode_s_per_step": self.decode_s_per_step,
                "steps": self.steps, "method": self.method}

    @classmethod
    def from_dict(cls, d: Any) -> StepCosts | None:
        """Parse what `as_dict` wrote (from an engine server's /stats); None if it is not that."""
        if not isinstance(d, dict):
            return None
        p, dec, steps = d.get("prefill_s_per_token"), d.get("decode_s_per_step"), d.get("steps")
        ok = all(v is None or (isinstance(v, int | float) and v >= 0) for v in (p, dec))
        if not ok or not isinstance(steps, int) or steps <= 0 or (p is None and dec is None):
            return None
        return cls(p, dec, steps, str(d.get("method") or "direct"))


class StepCostMeter:
    """Records steps (engine thread) and fits the weights when asked (any thread: it reads a
    snapshot of the window, each entry one immutable tuple)."""

    def __init__(self, window: int = DEFAULT_WINDOW) -> None:
        self._steps: deque[tuple[int, int, float]] = deque(maxlen=window)

    def record(self, prefill_tokens: int, decode_steps: int, seconds: float) -> None:
        if (prefill_tokens or decode_steps) and seconds >= 0:
            self._steps.append((prefill_tokens, decode_steps, seconds))

    def costs(self) -> StepCosts | None:
        steps = list(self._steps)
        if not steps:
            return None
        fitted = _least_squares(steps)
        if fitted is not None:
            return StepCosts(fitted[0], fitted[1], len(steps), "regression")
        direct = _direct(steps)
        return None if direct.prefill_s_per_token is None and direct.decode_s_per_step is None else direct


def _least_squares(steps: list[tuple[int, int, float]]) -> tuple[float, float] | None:
    """(s_prefill, s_decode) from the 2x2 normal equations; None if singular or negative."""
    spp = sum(p * p for p, _, _ in steps)
    sdd = sum(d * d for _, d, _ in steps)
    spd = sum(p * d for p, d, _ in steps)
    spt = sum(p * t for p, _, t in steps)
    sdt = sum(d * t for _, d, t in steps)
    det = spp * sdd - spd * spd
    if spd == 0 or det <= 1e-9 * spp * sdd:  # no step mixes the kinds, or they always come in proportion
        return None
    a = (spt * sdd - sdt * spd) / det
    b = (sdt * spp - spt * spd) / det
    if a <= 0 or b <= 0:  # noise made one kind look free: do not trust the fit
        return None
    return a, b


def _direct(steps: list[tuple[int, int, float]]) -> StepCosts:
    p_tok = sum(p for p, d, _ in steps if d == 0)
    p_sec = sum(t for _, d, t in steps if d == 0)
    d_n = sum(d for p, d, _ in steps if p == 0)
    d_sec = sum(t for p, _, t in steps if p == 0)
    return StepCosts(p_sec / p_tok if p_tok else None, d_sec / d_n if d_n else None, len(steps), "direct")
