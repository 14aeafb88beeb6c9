"""When and how far to speculate: adaptive k per request and the automatic off switch.

`SpeculativeDecoder` runs after each engine step (EngineCore.step): it records what the step
verified (acceptance, metrics), feeds the step's time into a `StepTimeModel`, then asks the
proposer for drafts for every decoding request that allows speculation and sets them on the
scheduler's requests (`SchedRequest.spec_token_ids`); the next `schedule()` verifies them in
the continuous batch.

The decision, per request i with measured acceptance a_i (the chance one draft position is
accepted given the ones before were), in a batch of B decoding requests, with the step time
modelled as t(T) = c0 + c1 * T for T batched tokens and p the measured proposing time per
draft token: a token is worth v = t(B) / B of plain decoding, a draft position costs c1 + p,
and draft j is kept only while a_i ** j * v > c1 + p. At batch 1 the fixed cost c0 dominates
v, so k grows to its cap; at large batches v shrinks to about c1 and k falls to 0 — the
off switch. A whole step is also skipped when the expected tokens per second with the chosen
drafts are below plain decoding's. Until the model has seen steps of different sizes it
speculates at the cap (the measurement it needs comes from prefills and verifies).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from backends.local.output import EngineStats
from backends.local.proposers import ProposalRequest, Proposer
from scheduler.plan import StepPlan
from scheduler.request import SchedRequest

log = logging.getLogger(__name__)


class StepTimeModel:
    """Least-squares fit of step seconds against batched tokens, old steps fading out."""

    def __init__(self, decay: float = 0.99) -> None:
        self.decay = decay
        self._s = [0.0] * 5  # weighted sums: n, x, x^2, y, x*y

    def observe(self, tokens: int, seconds: float) -> None:
        d = self.decay
        n, sx, sxx, sy, sxy = self._s
        x = float(tokens)
        self._s = [n * d + 1, sx * d + x, sxx * d + x * x, sy * d + seconds, sxy * d + x * seconds]

    def fit(self) -> tuple[float, float] | None:
        """(c0 seconds per step, c1 seconds per token), None while the sizes seen do not vary."""
        n, sx, sxx, sy, sxy = self._s
        var = n * sxx - sx * sx
        if n < 4 or var <= 1e-9 * max(1.0, n * sxx):
            return None
        c1 = max((n * sxy - sx * sy) / var, 0.0)
        c0 = max((sy - c1 * sx) / n, 0.0)
        return c0, c1


@dataclass(slots=True)
class _Acceptance:
    """Per-request acceptance counts, decayed so the estimate follows the text's phases."""

    accepted: float = 1.0  # prior: one accept, one reject (estimate 0.5)
    rejected: float = 1.0

    @property
    def rate(self) -> float:
        return self.accepted / (self.accepted + self.rejected)

    def update(self, num_drafts: int, num_accepted: int, decay: float = 0.9) -> None:
        self.accepted = self.accepted * decay + num_accepted
        self.rejected = self.rejected * decay + (1 if num_accepted < num_drafts else 0)


class SpeculativeDecoder:
    """Proposes drafts between steps; `num_tokens` is the cap k on drafts per request."""

    def __init__(self, proposer: Proposer, num_tokens: int = 4, adaptive: bool = True) -> None:
        if num_tokens < 1:
            raise ValueError("num_speculative_tokens must be >= 1")
        self.proposer = proposer
        self.num_tokens = num_tokens
        self.adaptive = adaptive
        self.time_model = StepTimeModel()
        self._acceptance: dict[str, _Acceptance] = {}
        self._propose_per_token = 0.0  # EMA of proposing seconds per draft token

    # ------------------------------------------------------------------ per step
    def after_step(
        self, plan: StepPlan, kept: dict[str, int | list[int]], seconds: float,
        decoding: list[SchedRequest], stats: EngineStats,
    ) -> None:
        """Record the step just run, then set drafts on `decoding` (requests that allow it)."""
        for request_id in plan.preempted:
            self.drop(request_id)
        verified = False
        for chunk in plan.chunks:
            tokens = kept.get(chunk.request_id)
            if chunk.num_spec_tokens and isinstance(tokens, list):
                verified = True
                self._record(chunk.request_id, chunk.num_spec_tokens, len(tokens) - 1, stats)
        if verified:
            stats.spec_verify_seconds += seconds
        self.time_model.observe(plan.num_batched_tokens, seconds)
        self._propose(decoding, stats)

    def drop(self, request_id: str) -> None:
        """Forget a request (finished, aborted, preempted)."""
        self._acceptance.pop(request_id, None)
        self.proposer.drop(request_id)

    def choose_k(self, acceptance: list[float], batch: int) -> list[int]:
        """Drafts per request for a batch of `batch` decoding requests (see the module doc)."""
        cap = self.num_tokens
        fit = self.time_model.fit() if self.adaptive else None
        if fit is None:
            return [cap] * len(acceptance)
        c0, c1 = fit
        value = (c0 + c1 * batch) / batch  # seconds one plain token costs
        cost = c1 + self._propose_per_token  # seconds one draft position costs
        ks = []
        for a in acceptance:
            k = 0
            while k < cap and a ** (k + 1) * value > cost:
                k += 1
            ks.append(k)
        # The whole step: expected tokens per second with these drafts against plain decoding.
        gain = sum(expected_tokens(a, k) for a, k in zip(acceptance, ks, strict=True))
        gain += batch - len(acceptance)
        spec_time = c0 + c1 * (batch + sum(ks)) + self._propose_per_token * sum(ks)
        if gain / spec_time <= batch / (c0 + c1 * batch):
            return [0] * len(acceptance)
        return ks

    # ------------------------------------------------------------------ internals
    def _record(self, request_id: str, num_drafts: int, num_accepted: int, stats: EngineStats) -> None:
        stats.spec_drafts += 1
        stats.spec_draft_tokens += num_drafts
        stats.spec_accepted_tokens += num_accepted
        by_pos = stats.spec_accepted_by_position
        if len(by_pos) < num_drafts:
            by_pos.extend([0] * (num_drafts - len(by_pos)))
        for j in range(num_accepted):
            by_pos[j] += 1
        self._acceptance.setdefault(request_id, _Acceptance()).update(num_drafts, num_accepted)

    def _propose(self, decoding: list[SchedRequest], stats: EngineStats) -> None:
        for request in decoding:
            request.spec_token_ids = []
        if not decoding:
            return
        rates = [self._acceptance.setdefault(r.request_id, _Acceptance()).rate for r in decoding]
        ks = self.choose_k(rates, len(decoding))
        wanted = [
            ProposalRequest(r.request_id, r.all_token_ids, k) for r, k in zip(decoding, ks, strict=True) if k > 0
        ]
        if not wanted:
            stats.spec_off_steps += 1
            return
        started = time.perf_counter()
        try:
            drafts = self.proposer.propose(wanted)
        except Exception:  # speculation is optional: a proposer failure only costs speed
            log.exception("draft proposer failed; decoding without drafts this step")
            return
        elapsed = time.perf_counter() - started
        stats.spec_propose_seconds += elapsed
        num_drafts = sum(len(d) for d in drafts.values())
        if num_drafts:
            per_token = elapsed / num_drafts
            self._propose_per_token = per_token if not self._propose_per_token else (
                0.9 * self._propose_per_token + 0.1 * per_token
            )
        for request in decoding:
            request.spec_token_ids = drafts.get(request.request_id, [])[: self.num_tokens]


def expected_tokens(acceptance: float, k: int) -> float:
    """Tokens one verify of k drafts yields on average (accepted drafts plus one)."""
    if acceptance >= 1:
        return float(k + 1)
    return (1 - acceptance ** (k + 1)) / (1 - acceptance)

