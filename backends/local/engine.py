"""The async engine: one background thread steps planner + runner; callers get token streams.

Threading. A dedicated engine thread owns the planner, the block manager, the runner and every
`OutputTracker`; nothing else touches them, so they need no locks. Callers (on any asyncio
loop) talk to it through a command queue (add / abort / weights / stop) and receive
`RequestOutput` deltas through one `call_soon_threadsafe` per loop per step. The event loop
therefore never blocks on a forward pass, and the engine never waits for a slow consumer:
deltas for a consumer that is behind are merged (see `RequestStream`).

Failure policy. A bad request is refused at admission (`RequestRejected`, a user-facing
message). An exception inside a step fails only the requests in that step (finish_reason
"error") and the loop keeps serving.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import queue
import threading
import time
import uuid
from typing import Any

from backends.local.admission import AdmissionLimits, check_request
from backends.local.engine_config import EngineConfig
from backends.local.engine_stream import RequestStream, StreamChannel
from backends.local.output import EngineStats, OutputTracker, RequestOutput, RequestRejected
from backends.local.types import RunnerInput, SamplingParams
from scheduler.fairness import is_stale
from scheduler.request import SchedRequest

log = logging.getLogger(__name__)

_STOP = object()


class AsyncEngine:
    """Continuous-batching engine over one model.

    `runner` / `tokenizer` / `wait_queue` may be injected (tests, the fair queue); by default
    they are built from `config`.
    """

    def __init__(
        self,
        config: EngineConfig,
        *,
        runner: Any = None,
        tokenizer: Any = None,
        wait_queue: Any = None,
    ) -> None:
        from backends.local.block_manager import BlockManager
        from scheduler.fair_queue import FairQueue
        from scheduler.scheduler import Scheduler, SchedulerConfig

        config.validate()
        self.config = config
        if runner is None:
            from backends.local.runner import ModelRunner

            runner = ModelRunner(
                config.model,
                device=config.device,
                dtype=config.dtype,
                kv_cache_dtype=None if config.kv_cache_dtype == "auto" else config.kv_cache_dtype,
                block_size=config.block_size,
                num_kv_blocks=config.num_kv_blocks,
                kv_cache_memory=config.kv_cache_memory,
            )
        self.runner = runner
        if tokenizer is None:
            from backends.local.tokenizer import Tokenizer

            tokenizer = Tokenizer(config.model)
        self.tokenizer = tokenizer
        self.block_manager = BlockManager(
            runner.num_kv_blocks, runner.block_size, enable_prefix_caching=config.enable_prefix_caching
        )
        # Cap the context at what the pool can hold, so an admitted request can always finish.
        kv_tokens = runner.num_kv_blocks * runner.block_size
        limits = [runner.max_model_len, kv_tokens]
        if config.max_model_len is not None:
            limits.append(config.max_model_len)
        self.max_model_len: int = min(limits)
        kv_limited = self.max_model_len == kv_tokens and kv_tokens < runner.max_model_len
        if self.max_model_len < (config.max_model_len or runner.max_model_len):
            log.warning("max_model_len capped at %d tokens: the KV pool holds no more", self.max_model_len)
        self.vocab_size: int = int(runner.config.vocab_size)
        self.admission = AdmissionLimits(self.max_model_len, self.vocab_size, kv_limited)
        self.eos_token_ids = frozenset(runner.eos_token_ids)
        self.scheduler = Scheduler(
            SchedulerConfig(
                max_num_seqs=config.max_num_seqs,
                max_num_batched_tokens=config.max_num_batched_tokens,
                max_model_len=self.max_model_len,
            ),
            self.block_manager,
            queue=wait_queue if wait_queue is not None else FairQueue(),  # FCFSQueue() to opt out
        )
        self.fairness_weights: dict[str, float] = {}
        self.fairness_version: int | None = None
        self._stats = EngineStats(kv_blocks_total=runner.num_kv_blocks)
        self._commands: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._live: dict[str, StreamChannel] = {}  # request id -> channel; guarded by _lock
        self._lock = threading.Lock()
        self._trackers: dict[str, tuple[OutputTracker, StreamChannel, SchedRequest]] = {}
        self._closed = False
        # Metrics hook (backends/local/metrics.py), called on the engine thread:
        # on_scheduled(plan) each step, on_outputs(outputs) for each batch of deltas.
        self.observer: Any = None
        self._thread = threading.Thread(target=self._run, name="fairgate-engine", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ public API
    def add_request(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        sampling: SamplingParams,
        tenant: str = "default",
        priority: str | int = "standard",
        cache_salt: str | None = None,
    ) -> RequestStream:
        """Admit a request; return the async iterator of its `RequestOutput` deltas.

        Raises `RequestRejected` (a ValueError) right away for a request that can never run.
        Leaving the iterator early (break, cancellation, `aclose()`) aborts the request.
        """
        if self._closed:
            raise RuntimeError("engine is closed")
        rank = check_request(prompt_token_ids, sampling, priority, self.admission)
        max_tokens = min(sampling.max_tokens, self.max_model_len - len(prompt_token_ids))
        sched = SchedRequest(
            request_id=request_id,
            prompt_token_ids=list(prompt_token_ids),
            max_tokens=max_tokens,
            tenant=tenant,
            priority=rank,
            arrival_time=time.monotonic(),
            # Per-tenant salt by default: tenants never share cached prefixes (timing channel).
            cache_salt=cache_salt if cache_salt is not None else tenant,
        )
        tracker = OutputTracker(
            request_id=request_id,
            sampling=sampling,
            num_prompt_tokens=len(prompt_token_ids),
            max_tokens=max_tokens,
            eos_token_ids=self.eos_token_ids,
            decoder=self.tokenizer.detokenizer(prompt_token_ids),
        )
        channel = StreamChannel(request_id, asyncio.get_running_loop())
        with self._lock:
            if request_id in self._live:
                raise RequestRejected(f"request id {request_id!r} is already running", "duplicate_request_id")
            self._live[request_id] = channel
        self._commands.put(("add", sched, tracker, channel))
        return RequestStream(channel, self.abort)

    def abort(self, request_id: str) -> None:
        """Stop a request and free its blocks at the next step boundary; unknown ids are ignored."""
        self._commands.put(("abort", request_id))

    async def generate(
        self,
        prompt: str | list[int],
        sampling: SamplingParams,
        request_id: str | None = None,
        **kwargs: Any,
    ) -> RequestOutput:
        """Run one request to the end; return one `RequestOutput` holding everything."""
        ids = self.tokenizer.encode(prompt) if isinstance(prompt, str) else list(prompt)
        request_id = request_id or f"gen-{uuid.uuid4().hex}"
        final: RequestOutput | None = None
        async with self.add_request(request_id, ids, sampling, **kwargs) as stream:
            async for delta in stream:
                if final is None:
                    final = delta
                else:
                    final.merge(delta)
        assert final is not None  # a stream always ends with a finished delta
        return final

    def set_fairness(self, weights: dict[str, float], version: int | None = None) -> bool:
        """New per-tenant weights; the next scheduling step uses them.

        A push older than the current `version` is stale and ignored (returns False), so
        pushes racing from several gateway replicas cannot roll weights back."""
        if is_stale(version, self.fairness_version):
            return False
        if version is None:
            version = (self.fairness_version or 0) + 1
        self.fairness_weights = dict(weights)
        self.fairness_version = version
        self._commands.put(("weights", dict(weights), version))
        return True

    def stats(self) -> EngineStats:
        """A snapshot for metrics, from any thread (no locks: every field is one plain read)."""
        bm = self.block_manager
        return dataclasses.replace(
            self._stats,
            running=self.scheduler.num_running,
            waiting=self.scheduler.num_waiting,
            kv_blocks_used=bm.num_used_blocks,
            prefix_cache_queries=bm.prefix_cache_queries,
            prefix_cache_hits=bm.prefix_cache_hits,
            preemptions=self.scheduler.num_preemptions,
        )

    @property
    def num_unfinished(self) -> int:
        with self._lock:
            return len(self._live)

    async def aclose(self) -> None:
        """Stop the loop; unfinished streams end with finish_reason "abort"."""
        if self._closed:
            return
        self._closed = True
        self._commands.put((_STOP,))
        await asyncio.to_thread(self._thread.join)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._commands.put((_STOP,))
            self._thread.join()

    # ------------------------------------------------------------------ engine thread
    def _run(self) -> None:
        try:
            while True:
                idle = not self._trackers
                if not self._drain_commands(block=idle):
                    break
                if self._trackers:
                    self._step()
        except BaseException:  # noqa: BLE001 - last resort: never leave streams hanging
            log.exception("engine loop died")
        finally:
            self._fail_all("abort", "engine shut down")

    def _drain_commands(self, block: bool) -> bool:
        """Apply queued commands; wait for one first when idle. False means stop."""
        try:
            cmd = self._commands.get(timeout=1.0) if block else self._commands.get_nowait()
        except queue.Empty:
            return True
        while True:
            if cmd[0] is _STOP:
                return False
            try:
                self._apply(cmd)
            except Exception:  # noqa: BLE001 - one bad command must not stop the engine
                log.exception("engine command %r failed", cmd[0])
                if cmd[0] == "add":
                    _, sched, tracker, channel = cmd
                    self._trackers.setdefault(sched.request_id, (tracker, channel, sched))
                    self._fail([sched.request_id], "engine error while admitting the request")
            try:
                cmd = self._commands.get_nowait()
            except queue.Empty:
                return True

    def _apply(self, cmd: tuple[Any, ...]) -> None:
        kind = cmd[0]
        if kind == "add":
            _, sched, tracker, channel = cmd
            if channel.closed:  # the consumer left before the request even started
                self._release(sched.request_id)
                channel.close()
                return
            self._trackers[sched.request_id] = (tracker, channel, sched)
            self.scheduler.add_request(sched)
            self._stats.requests_added += 1
        elif kind == "abort":
            entry = self._trackers.pop(cmd[1], None)
            if entry is not None:
                tracker, channel, sched = entry
                self.scheduler.abort_request(sched.request_id)
                self._stats.requests_aborted += 1
                self._deliver([(channel, tracker.finish("abort", sched.num_cached_tokens))])
                self._release(sched.request_id)
        elif kind == "weights":
            set_weights = getattr(self.scheduler.queue, "set_weights", None)
            if set_weights is not None:
                try:
                    set_weights(cmd[1], version=cmd[2])
                except Exception:  # noqa: BLE001 - bad weights must not kill the loop
                    log.exception("set_weights failed")

    def _step(self) -> None:
        try:
            plan = self.scheduler.schedule()
        except Exception:  # noqa: BLE001 - a planner bug: fail what is in flight, keep serving
            log.exception("scheduling failed; failing %d request(s)", len(self._trackers))
            self._fail(list(self._trackers), "engine error while scheduling")
            return
        if plan.is_empty:
            # Nothing fits right now (e.g. every block is held); wait for commands briefly
            # instead of spinning.
            self._drain_commands(block=True)
            return
        if self.observer is not None:
            self.observer.on_scheduled(plan)
        inputs = [self._runner_input(chunk) for chunk in plan.chunks]
        started = time.perf_counter()
        try:
            sampled_list = self.runner.execute(inputs)
            if len(sampled_list) != len(inputs):
                raise RuntimeError(f"runner returned {len(sampled_list)} results for {len(inputs)} inputs")
        except Exception as exc:  # noqa: BLE001 - fail this step's requests, keep serving
            log.exception("engine step failed; failing %d request(s)", len(inputs))
            self._fail([c.request_id for c in plan.chunks], f"engine error: {type(exc).__name__}")
            return
        finally:
            self._stats.busy_seconds += time.perf_counter() - started
        sampled = {
            chunk.request_id: tok
            for chunk, tok in zip(plan.chunks, sampled_list, strict=True)
            if tok is not None
        }
        self.scheduler.update_from_output(plan, sampled)
        self._stats.steps += 1
        self._stats.tokens_computed += plan.num_batched_tokens
        self._stats.generation_tokens += len(sampled)
        deliveries: list[tuple[StreamChannel, RequestOutput]] = []
        for request_id, token_id in sampled.items():
            entry = self._trackers.get(request_id)
            if entry is None:
                continue
            tracker, channel, sched = entry
            try:
                out = tracker.process([token_id], sched.num_cached_tokens)
            except Exception:  # noqa: BLE001 - e.g. a detokenizer bug: fail only this request
                log.exception("output processing failed for one request")
                self._fail([request_id], "engine error while decoding output")
                continue
            if out.finished:
                self._trackers.pop(request_id)
                self.scheduler.finish_request(request_id)
                self._release(request_id)
            if out.token_ids or out.text or out.finished:
                deliveries.append((channel, out))
        self._deliver(deliveries)

    def _runner_input(self, chunk: Any) -> RunnerInput:
        tracker, _, req = self._trackers[chunk.request_id]
        start, n = chunk.start_pos, chunk.num_tokens
        n_prompt = len(req.prompt_token_ids)
        if start >= n_prompt:  # decode (or recompute of generated tokens): no list concat
            token_ids = req.output_token_ids[start - n_prompt : start - n_prompt + n]
        elif start + n <= n_prompt:
            token_ids = req.prompt_token_ids[start : start + n]
        else:
            token_ids = (req.prompt_token_ids + req.output_token_ids)[start : start + n]
        return RunnerInput(
            request_id=req.request_id,
            token_ids=token_ids,
            start_pos=start,
            block_table=chunk.block_table,
            sample=chunk.sample,
            sampling=tracker.sampling,
            num_output_tokens=len(req.output_token_ids),
        )

    def _fail(self, request_ids: list[str], message: str) -> None:
        deliveries = []
        for request_id in request_ids:
            entry = self._trackers.pop(request_id, None)
            if entry is None:
                continue
            tracker, channel, sched = entry
            try:
                self.scheduler.abort_request(request_id)
            except Exception:  # noqa: BLE001
                log.exception("abort after a failed step also failed")
            self._stats.requests_failed += 1
            deliveries.append((channel, tracker.finish("error", sched.num_cached_tokens, message)))
            self._release(request_id)
        self._deliver(deliveries)

    def _fail_all(self, reason: str, message: str) -> None:
        deliveries = []
        for request_id, (tracker, channel, sched) in list(self._trackers.items()):
            deliveries.append((channel, tracker.finish(reason, sched.num_cached_tokens, message)))  # type: ignore[arg-type]
            self._release(request_id)
        self._trackers.clear()
        # Requests still in the command queue never started: close their streams too.
        while True:
            try:
                cmd = self._commands.get_nowait()
            except queue.Empty:
                break
            if cmd[0] == "add":
                _, sched, tracker, channel = cmd
                deliveries.append((channel, tracker.finish("abort", 0, message)))
                self._release(sched.request_id)
        self._deliver(deliveries)

    def _release(self, request_id: str) -> None:
        with self._lock:
            self._live.pop(request_id, None)

    def _deliver(self, deliveries: list[tuple[StreamChannel, RequestOutput]]) -> None:
        if self.observer is not None:
            self.observer.on_outputs([out for _, out in deliveries])
        StreamChannel.send_all(deliveries)

__all__ = ["AsyncEngine", "EngineConfig", "EngineStats", "RequestRejected", "RequestStream"]
