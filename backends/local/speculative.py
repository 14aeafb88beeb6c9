"""When and how far to speculate: adaptive k per request and the automatic off switch.

`SpeculativeDecoder` runs after each engine step (EngineCore.step): it records what the step
verified (acceptance, metrics), feeds the step's time into a `StepTimeModel`, then asks the
proposer for drafts for every decoding request that allows speculation and sets them on the
scheduler's requests (`SchedRequest.spec_token_ids`); the next `schedule()` verifies them in
the continuous batch.

The decision, per request i with measured acceptance a_i (the chance one draft position is
accepted given the ones before were), in a batch of B decoding requests: the step time is
modelled as t = c0 + c1 * T + c2 * C (T batched tokens, C verify chunks; `StepTimeModel`,
fitted on every decode or verify step), p is the measured proposing time per draft
token. A token is worth v = t(B, 0) / B of plain decoding; k drafts yield E(a_i, k) =
(1 - a_i^(k+1)) / (1 - a_i) tokens and cost c2 + (c1 + p) * k, so request i gets the k (0 ..
cap) with the largest saving (E - 1) * v - c2 - (c1 + p) * k. At batch 1 the fixed cost c0
dominates v, so k grows to its cap when guesses are good; at large batches v shrinks toward
c1 and k falls to 0: that is the off switch. The whole step is also run plain when the
expected tokens per second with the chosen drafts are below plain decoding's. Until the model
has seen enough steps, a request starts at one draft and gains one per fully accepted verify.
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
    """Least-squares fit t = c0 + c1 * tokens + c2 * chunks of step seconds (old steps fading).

    `chunks` counts verify chunks: each costs more than its tokens alone (its own attention
    pass), which is what makes many verifies in one batch expensive.
    """

    def __init__(self, decay: float = 0.99, ridge: float = 1e-6) -> None:
        self.decay = decay
        self.ridge = ridge
        self._xtx = [[0.0] * 3 for _ in range(3)]  # weighted sums of x x^T, x = (1, tokens, chunks)
        self._xty = [0.0] * 3
        self.num_observed = 0

    def observe(self, tokens: int, chunks: int, seconds: float) -> None:
        d = self.decay
        x = (1.0, float(tokens), float(chunks))
        for i in range(3):
            self._xty[i] = self._xty[i] * d + x[i] * seconds
            for j in range(3):
                self._xtx[i][j] = self._xtx[i][j] * d + x[i] * x[j]
        self.num_observed += 1

    def fit(self) -> tuple[float, float, float] | None:
        """(c0 s/step, c1 s/token, c2 s/multi-token chunk), None until enough varied steps."""
        if self.num_observed < 8:
            return None
        a = [row[:] + [b] for row, b in zip(self._xtx, self._xty, strict=True)]
        for i in range(3):
            a[i][i] += self.ridge * max(1.0, a[i][i])
        coef = _solve3(a)
        if coef is None:
            return None
        c0, c1, c2 = (max(c, 0.0) for c in coef)
        return c0, c1, c2

    def predict(self, tokens: int, chunks: int) -> float | None:
        fit = self.fit()
        return None if fit is None else fit[0] + fit[1] * tokens + fit[2] * chunks


def _solve3(a: list[list[float]]) -> list[float] | None:
    """Gaussian elimination with partial pivoting on a 3x4 augmented matrix."""
    n = 3
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) < 1e-18:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(col + 1, n):
            f = a[r][col] / a[col][col]
            for c in range(col, n + 1):
                a[r][c] -= f * a[col][c]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        x[r] = (a[r][n] - sum(a[r][c] * x[c] for c in range(r + 1, n))) / a[r][r]
    return x


@dataclass(slots=True)
class Acceptance:
    """One request's acceptance counts, decayed so the estimate follows the text's phases."""

    accepted: float = 0.5  # prior: half an accept, half a reject (estimate 0.5)
    rejected: float = 0.5
    streak: int = 0  # verifies in a row whose drafts were all accepted

    @property
    def rate(self) -> float:
        return self.accepted / (self.accepted + self.rejected)

    def update(self, num_drafts: int, num_accepted: int, decay: float = 0.8) -> None:
        self.accepted = self.accepted * decay + num_accepted
        self.rejected = self.rejected * decay + (1 if num_accepted < num_drafts else 0)
        self.streak = self.streak + 1 if num_accepted == num_drafts else 0


class SpeculativeDecoder:
    """Proposes drafts between steps; `num_tokens` is the cap k on drafts per request."""

    def __init__(self, proposer: Proposer, num_tokens: int = 4, adaptive: bool = True) -> None:
        if num_tokens < 1:
            raise ValueError("num_speculative_tokens must be >= 1")
        self.proposer = proposer
        self.num_tokens = num_tokens
        self.adaptive = adaptive
        self.time_model = StepTimeModel()
        self._acceptance: dict[str, Acceptance] = {}
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
        # The model describes decode and verify steps; a prefill's tokens cost differently
        # (attention over its whole chunk) and would bend the fit, so those steps are left out.
        if all(c.num_tokens == 1 + c.num_spec_tokens for c in plan.chunks):
            verifies = sum(1 for c in plan.chunks if c.num_spec_tokens)
            self.time_model.observe(plan.num_batched_tokens, verifies, seconds)
        self._propose(decoding, stats)

    def drop(self, request_id: str) -> None:
        """Forget a request (finished, aborted, preempted)."""
        self._acceptance.pop(request_id, None)
        self.proposer.drop(request_id)

    def choose_k(self, requests: list[Acceptance], batch: int) -> list[int]:
        """Drafts per request for a batch of `batch` decoding requests (see the module doc)."""
        cap = self.num_tokens
        fit = self.time_model.fit() if self.adaptive else None
        if fit is None:
            if not self.adaptive:
                return [cap] * len(requests)
            # No step-time model yet: start at one draft, one more per fully accepted verify.
            return [min(cap, 1 + r.streak) for r in requests]
        acceptance = [r.rate for r in requests]
        c0, c1, c2 = fit
        plain_time = c0 + c1 * batch
        value = plain_time / batch  # seconds one plain token costs
        per_draft = c1 + self._propose_per_token  # seconds one draft position costs
        ks = []
        for a in acceptance:
            # the k with the largest expected saving: extra tokens' worth minus their cost
            best, best_k = 0.0, 0
            for k in range(1, cap + 1):
                saving = (expected_tokens(a, k) - 1) * value - c2 - per_draft * k
                if saving > best:
                    best, best_k = saving, k
            ks.append(best_k)
        # The whole step: expected tokens per second with these drafts against plain decoding.
        gain = sum(expected_tokens(a, k) for a, k in zip(acceptance, ks, strict=True))
        gain += batch - len(acceptance)
        num_spec = sum(1 for k in ks if k)
        spec_time = plain_time + per_draft * sum(ks) + c2 * num_spec
        if not num_spec or gain / spec_time <= batch / plain_time:
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
        self._acceptance.setdefault(request_id, Acceptance()).update(num_drafts, num_accepted)

    def _propose(self, decoding: list[SchedRequest], stats: EngineStats) -> None:
        for request in decoding:
            request.spec_token_ids = []
        if not decoding:
            return
        ks = self.choose_k([self._acceptance.setdefault(r.request_id, Acceptance()) for r in decoding], len(decoding))
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

