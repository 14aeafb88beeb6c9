"""The engine's synchronous core: one step is schedule -> execute -> update -> outputs.

No threads, no asyncio, no delivery: `EngineCore.step()` returns the `RequestOutput` deltas the
step produced, and `AsyncEngine` (engine.py) runs it on its thread, feeds it commands, applies
the error policy (a `StepFailed` names the requests to fail) and delivers the deltas. The core
owns the scheduler (and through it the block manager), the model executor and one
`OutputTracker` per unfinished request. With speculative decoding on, a `SpeculativeDecoder`
(speculative.py) runs after each step and sets drafts on the decoding requests; the next
step verifies them (several tokens per request may come back from one step).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

from fairgate.backends.local.engine.factory import EngineParts
from fairgate.backends.local.engine.output import (
    EngineStats,
    FinishReason,
    OutputTracker,
    RequestOutput,
)
from fairgate.backends.local.engine.protocols import EngineObserver
from fairgate.backends.local.engine.step_cost import StepCostMeter
from fairgate.backends.local.engine.types import RunnerInput, SampleResult
from fairgate.scheduler.plan import ScheduledChunk, StepPlan
from fairgate.scheduler.request import SchedRequest

log = logging.getLogger(__name__)


class StepFailed(Exception):
    """A step could not finish; fail `request_ids` with `message`, the others keep running."""

    def __init__(self, request_ids: list[str], message: str) -> None:
        super().__init__(message)
        self.request_ids = request_ids
        self.message = message


@dataclass(slots=True)
class StepResult:
    outputs: list[RequestOutput]  # deltas to deliver, finished ones included
    ran: bool  # False: nothing could be scheduled (e.g. every block held); wait for a command


@dataclass(slots=True)
class LiveRequest:
    sched: SchedRequest  # the scheduler's view: token ids and how many have KV
    tracker: OutputTracker  # text so far and the stop checks


class EngineCore:
    """Steps one model. Call everything from one thread (it holds no locks)."""

    def __init__(self, parts: EngineParts) -> None:
        self.scheduler = parts.scheduler
        self.runner = parts.runner
        self.stats = EngineStats(kv_blocks_total=parts.runner.num_kv_blocks)
        self.speculator = parts.speculator
        self.observer: EngineObserver | None = None
        self.step_costs = StepCostMeter()  # seconds per prefill token / decode step, measured
        self._live: dict[str, LiveRequest] = {}

    @property
    def has_unfinished(self) -> bool:
        return bool(self._live)

    # ------------------------------------------------------------------ the step
    def step(self) -> StepResult:
        """Run one step; raises `StepFailed` when scheduling or the forward pass fails."""
        started = time.perf_counter()
        if self.speculator is not None:
            self.speculator.before_step()
        plan = self._schedule()
        if plan.is_empty:
            return StepResult([], ran=False)
        sampled, extras = self._execute(plan)
        self.scheduler.update_from_output(plan, sampled)
        self._count(plan, sampled)
        outputs = self._outputs(sampled, extras)
        if self.speculator is not None:
            # The whole step so far (planning and output processing grow with tokens too).
            seconds = time.perf_counter() - started
            decoding = [r for r in self.scheduler.running if r.num_computed_tokens == r.num_tokens - 1]
            allowed = [r for r in decoding if self._live[r.request_id].tracker.sampling.speculative]
            self.speculator.after_step(plan, sampled, seconds, allowed, len(decoding), self.stats)
        return StepResult(outputs, ran=True)

    def _schedule(self) -> StepPlan:
        try:
            plan = self.scheduler.schedule()
        except Exception as exc:  # a planner bug: fail what is in flight, keep serving
            raise StepFailed(list(self._live), "engine error while scheduling") from exc
        if self.observer is not None and not plan.is_empty:
            self.observer.on_scheduled(plan)
        return plan

    def _execute(self, plan: StepPlan) -> tuple[dict[str, int | list[int]], dict[str, SampleResult]]:
        """Run the plan; the sampled token (a verify: the kept tokens) per request that sampled,
        and the `SampleResult`s (logprobs) of the requests that asked for them."""
        inputs = [self._runner_input(chunk) for chunk in plan.chunks]
        started = time.perf_counter()
        try:
            sampled = self.runner.execute(inputs)
            if len(sampled) != len(inputs):
                raise RuntimeError(f"runner returned {len(sampled)} results for {len(inputs)} inputs")
        except Exception as exc:  # fail this step's requests, keep serving
            raise StepFailed([c.request_id for c in plan.chunks], f"engine error: {type(exc).__name__}") from exc
        finally:
            seconds = time.perf_counter() - started
            self.stats.busy_seconds += seconds
        self.step_costs.record(*self._work(plan), seconds)
        tokens: dict[str, int | list[int]] = {}
        extras: dict[str, SampleResult] = {}
        for c, res in zip(plan.chunks, sampled, strict=True):
            if isinstance(res, SampleResult):
                extras[c.request_id] = res
                res = res.token_id
            if res is not None:
                tokens[c.request_id] = res
        return tokens, extras

    def _work(self, plan: StepPlan) -> tuple[int, int]:
        """(prefill tokens, decode sequence-steps) of a plan: a chunk that advances a request
        past its prompt by one position is a decode step (its drafts, verified in parallel,
        count as prefill tokens); every other chunk's tokens are prefill."""
        prefill = decode = 0
        for c in plan.chunks:
            live = self._live.get(c.request_id)
            n_prompt = len(live.sched.prompt_token_ids) if live is not None else 0
            if c.num_tokens - c.num_spec_tokens == 1 and c.start_pos >= n_prompt:
                decode += 1
                prefill += c.num_spec_tokens
            else:
                prefill += c.num_tokens
        return prefill, decode

    def _runner_input(self, chunk: ScheduledChunk) -> RunnerInput:
        live = self._live[chunk.request_id]
        req = live.sched
        start, num_spec = chunk.start_pos, chunk.num_spec_tokens
        n = chunk.num_tokens - num_spec
        n_prompt = len(req.prompt_token_ids)
        if start >= n_prompt:  # decode (or recompute of generated tokens): no list concat
            token_ids = req.output_token_ids[start - n_prompt : start - n_prompt + n]
        elif start + n <= n_prompt:
            token_ids = req.prompt_token_ids[start : start + n]
        else:
            token_ids = (req.prompt_token_ids + req.output_token_ids)[start : start + n]
        if num_spec:  # the drafts to verify follow the last token
            token_ids = token_ids + req.spec_token_ids[:num_spec]
        return RunnerInput(
            request_id=chunk.request_id,
            token_ids=token_ids,
            start_pos=start,
            block_table=chunk.block_table,
            sample=chunk.sample,
            sampling=live.tracker.sampling,
            num_output_tokens=len(req.output_token_ids),
            prompt_token_ids=req.prompt_token_ids,
            output_token_ids=req.output_token_ids,
            num_spec_tokens=num_spec,
        )

    def _count(self, plan: StepPlan, sampled: dict[str, int | list[int]]) -> None:
        stats = self.stats
        stats.steps += 1
        stats.tokens_computed += plan.num_batched_tokens
        stats.generation_tokens += sum(1 if isinstance(t, int) else len(t) for t in sampled.values())
        stats.sampled_seqs += len(sampled)

    def _outputs(self, sampled: dict[str, int | list[int]], extras: dict[str, SampleResult]) -> list[RequestOutput]:
        """Detokenize and stop-check the sampled tokens; retire finished requests."""
        outputs: list[RequestOutput] = []
        for request_id, res in extras.items():
            if res.prompt_logprobs and request_id in self._live:
                self._live[request_id].tracker.add_prompt_logprobs(res.prompt_logprobs)
            if res.pooled is not None and request_id in self._live:
                self._live[request_id].tracker.add_pooled(*res.pooled)
        for request_id, tokens in sampled.items():
            live = self._live.get(request_id)
            if live is None:
                continue
            extra = extras.get(request_id)
            logprobs = [extra.logprobs] if extra is not None and extra.logprobs is not None else None
            try:
                # Several tokens from a verify: the tracker drops any after a stop.
                out = live.tracker.process([tokens] if isinstance(tokens, int) else tokens,
                                           live.sched.num_cached_tokens, logprobs)
            except Exception:  # e.g. a detokenizer bug: fail only this request
                log.exception("output processing failed for one request")
                outputs += self.fail([request_id], "engine error while decoding output")
                continue
            if out.finished:
                self._retire(request_id)
            if out.token_ids or out.text or out.finished:
                outputs.append(out)
        return outputs

    def _retire(self, request_id: str) -> None:
        del self._live[request_id]
        self.scheduler.finish_request(request_id)
        if self.speculator is not None:
            self.speculator.drop(request_id)

    # ------------------------------------------------------------------ commands
    def add(self, request: SchedRequest, tracker: OutputTracker) -> None:
        """Queue a request; its tracker is registered first, so `fail` can close it."""
        self._live[request.request_id] = LiveRequest(request, tracker)
        self.scheduler.add_request(request)
        self.stats.requests_added += 1

    def abort(self, request_id: str) -> RequestOutput | None:
        """Drop a request now; its last delta (finish_reason "abort"), None if unknown."""
        live = self._live.pop(request_id, None)
        if live is None:
            return None
        self.scheduler.abort_request(request_id)
        if self.speculator is not None:
            self.speculator.drop(request_id)
        self.stats.requests_aborted += 1
        return live.tracker.finish("abort", live.sched.num_cached_tokens)

    def set_weights(self, weights: Mapping[str, float], version: int) -> None:
        self.scheduler.queue.set_weights(weights, version=version)

    def fail(self, request_ids: list[str], message: str) -> list[RequestOutput]:
        """Finish these requests with finish_reason "error"; their last deltas."""
        outputs = []
        for request_id in request_ids:
            live = self._live.pop(request_id, None)
            if live is None:
                continue
            try:
                self.scheduler.abort_request(request_id)
            except Exception:  # noqa: BLE001
                log.exception("abort after a failed step also failed")
            if self.speculator is not None:
                self.speculator.drop(request_id)
            self.stats.requests_failed += 1
            outputs.append(live.tracker.finish("error", live.sched.num_cached_tokens, message))
        return outputs

    def finish_all(self, reason: FinishReason, message: str) -> list[RequestOutput]:
        """Close every unfinished request (the engine is stopping); their last deltas."""
        outputs = [
            live.tracker.finish(reason, live.sched.num_cached_tokens, message) for live in self._live.values()
        ]
        self._live.clear()
        return outputs

