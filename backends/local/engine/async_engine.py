"""The async engine: one background thread steps an `EngineCore`; callers get token streams.

Threading. A dedicated engine thread owns the `EngineCore` (engine_core.py: scheduler, block
manager, runner, output trackers); nothing else touches it, so it needs no locks. Callers (on
any asyncio loop) talk to it through a queue of command values (`AddRequest`, `AbortRequest`,
`SetWeights`, `Stop`) and receive `RequestOutput` deltas through one `call_soon_threadsafe`
per loop per step. The event loop therefore never blocks on a forward pass, and the engine
never waits for a slow consumer: deltas for a consumer that is behind are merged (see
`RequestStream`).

Failure policy. A bad request is refused at admission (`RequestRejected`, a user-facing
message). A step that fails (`StepFailed`) fails only the requests it names (finish_reason
"error") and the loop keeps serving; a command that fails fails only its own request.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import queue
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from fairgate.backends.local.engine.admission import check_request
from fairgate.backends.local.engine.config import EngineConfig
from fairgate.backends.local.engine.core import EngineCore, StepFailed
from fairgate.backends.local.engine.cores import pin_this_thread, plan_cores, shorten_gil_switch
from fairgate.backends.local.engine.factory import build_engine_parts
from fairgate.backends.local.engine.output import (
    EngineStats,
    OutputTracker,
    RequestOutput,
    RequestRejected,
)
from fairgate.backends.local.engine.protocols import (
    EngineObserver,
    EngineTokenizer,
    ModelExecutor,
)
from fairgate.backends.local.engine.stats_log import EngineStatsLogger
from fairgate.backends.local.engine.step_cost import StepCosts
from fairgate.backends.local.engine.stream import RequestStream, StreamChannel
from fairgate.backends.local.engine.types import SamplingParams
from fairgate.kernels import release_pool
from fairgate.scheduler.fairness import is_stale
from fairgate.scheduler.queue import WaitQueue
from fairgate.scheduler.request import SchedRequest

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------- commands (caller -> engine thread)
@dataclass(slots=True)
class AddRequest:
    request: SchedRequest
    tracker: OutputTracker
    channel: StreamChannel  # where its deltas go


@dataclass(slots=True)
class AbortRequest:
    request_id: str


@dataclass(slots=True)
class SetWeights:
    weights: dict[str, float]
    version: int


@dataclass(slots=True)
class Stop:
    """End the loop; unfinished requests end with finish_reason "abort"."""


Command = AddRequest | AbortRequest | SetWeights | Stop


class AsyncEngine:
    """Continuous-batching engine over one model.

    `runner` / `tokenizer` / `wait_queue` may be injected (tests, the fair queue); by default
    `build_engine_parts` builds them from `config`.
    """

    def __init__(
        self,
        config: EngineConfig,
        *,
        runner: ModelExecutor | None = None,
        tokenizer: EngineTokenizer | None = None,
        wait_queue: WaitQueue | None = None,
    ) -> None:
        started = time.perf_counter()
        self._cores = plan_cores(config.cpu_cores) if config.cpu_cores else None  # ("auto" on 2 cores: None)
        if config.gil_switch_interval_ms is not None:
            shorten_gil_switch(config.gil_switch_interval_ms / 1000)
        if self._cores is not None:  # before the build: its kernel plan and cost clock read the count
            torch.set_num_threads(len(self._cores.compute))
        parts = build_engine_parts(config, runner=runner, tokenizer=tokenizer, wait_queue=wait_queue)
        self.config = config
        self.core = EngineCore(parts)
        self.core.stats.startup_seconds = time.perf_counter() - started
        # Loading ran torch ops here, which left an OpenMP pool in this thread; with the engine
        # thread's own pool that outnumbers a small machine's cores and throttles every barrier
        # (kernels/native/openmp.py). The engine thread is the one that computes from now on.
        release_pool()
        if self._cores is not None:
            pin_this_thread(self._cores.rest)  # the building thread (a server's event loop) and its later threads
            log.info("%s", self._cores.describe())
        self.runner = parts.runner
        self.tokenizer = parts.tokenizer
        self.block_manager = parts.block_manager
        self.scheduler = parts.scheduler
        self.admission = parts.limits
        self.max_model_len: int = parts.limits.max_model_len
        self.vocab_size: int = parts.limits.vocab_size
        self.eos_token_ids = parts.eos_token_ids
        self.fairness_weights: dict[str, float] = {}
        self.fairness_version: int | None = None
        self._commands: queue.SimpleQueue[Command] = queue.SimpleQueue()
        self._unfinished: set[str] = set()  # request ids added and not yet finished; guarded by _lock
        self._lock = threading.Lock()
        self._channels: dict[str, StreamChannel] = {}  # engine thread only
        self._closed = False
        self._stopped = False  # engine thread: a Stop command was taken
        self._thread = threading.Thread(target=self._run, name="fairgate-engine", daemon=True)
        self._thread.start()
        name = config.served_model_name or Path(config.model).name
        self._stats_log = EngineStatsLogger(self, name, config.stats_interval_s).start()

    @property
    def observer(self) -> EngineObserver | None:
        """Metrics hook (backends/local/engine/metrics.py), called on the engine thread:
        `on_scheduled(plan)` each step, `on_outputs(outputs)` for each batch of deltas."""
        return self.core.observer

    @observer.setter
    def observer(self, observer: EngineObserver | None) -> None:
        self.core.observer = observer

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
        # the engine's own stop at its context (as vLLM's engine): the servers size max_tokens before this
        # (openai_wire.context.completion_limit) and refuse what does not fit; direct callers get 'length'
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
            decoder=self.tokenizer.detokenizer(prompt_token_ids, sampling.skip_special_tokens),
        )
        channel = StreamChannel(request_id, asyncio.get_running_loop())
        with self._lock:
            if request_id in self._unfinished:
                raise RequestRejected(f"request id {request_id!r} is already running", "duplicate_request_id")
            self._unfinished.add(request_id)
        self._commands.put(AddRequest(sched, tracker, channel))
        return RequestStream(channel, self.abort)

    def abort(self, request_id: str) -> None:
        """Stop a request and free its blocks at the next step boundary; unknown ids are ignored."""
        self._commands.put(AbortRequest(request_id))

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
        self._commands.put(SetWeights(dict(weights), version))
        return True

    def stats(self) -> EngineStats:
        """A snapshot for metrics, from any thread (no locks: every field is one plain read)."""
        bm = self.block_manager
        return dataclasses.replace(
            self.core.stats,
            running=self.scheduler.num_running,
            waiting=self.scheduler.num_waiting,
            kv_blocks_used=bm.num_used_blocks,
            prefix_cache_queries=bm.prefix_cache_queries,
            prefix_cache_hits=bm.prefix_cache_hits,
            preemptions=self.scheduler.num_preemptions,
            fairness_preemptions=self.scheduler.num_fairness_preemptions,
            recomputed_tokens=self.scheduler.num_recomputed_tokens,
            fairness_recomputed_tokens=self.scheduler.num_fairness_recomputed_tokens,
        )

    def step_costs(self) -> StepCosts | None:
        """Measured seconds per prefill token and per decode step (None: nothing ran yet)."""
        return self.core.step_costs.costs()

    @property
    def num_unfinished(self) -> int:
        with self._lock:
            return len(self._unfinished)

    async def aclose(self) -> None:
        """Stop the loop; unfinished streams end with finish_reason "abort"."""
        if self._closed:
            return
        self._closed = True
        self._commands.put(Stop())
        await asyncio.to_thread(self._thread.join)
        await asyncio.to_thread(self._stats_log.stop)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._commands.put(Stop())
            self._thread.join()
            self._stats_log.stop()

    # ------------------------------------------------------------------ engine thread
    def _run(self) -> None:
        if self._cores is not None:
            pin_this_thread(self._cores.compute)  # before the first parallel region: its workers inherit it
        try:
            while not self._stopped:
                self._drain_commands(block=not self.core.has_unfinished)
                if self.core.has_unfinished and not self._stopped:
                    self._step()
        except BaseException:  # noqa: BLE001 - last resort: never leave streams hanging
            log.exception("engine loop died")
        finally:
            self._shutdown("engine shut down")

    def _step(self) -> None:
        try:
            result = self.core.step()
        except StepFailed as failed:
            log.exception("engine step failed; failing %d request(s)", len(failed.request_ids))
            self._deliver(self.core.fail(failed.request_ids, failed.message))
            return
        if not result.ran:
            # Nothing fits right now (e.g. every block is held); wait for commands briefly
            # instead of spinning.
            self._drain_commands(block=True)
            return
        self._deliver(result.outputs)

    def _drain_commands(self, block: bool) -> None:
        """Apply queued commands, waiting up to a second for the first when `block`."""
        try:
            cmd = self._commands.get(timeout=1.0) if block else self._commands.get_nowait()
        except queue.Empty:
            return
        while True:
            if isinstance(cmd, Stop):
                self._stopped = True
                return
            self._apply(cmd)
            try:
                cmd = self._commands.get_nowait()
            except queue.Empty:
                return

    def _apply(self, cmd: AddRequest | AbortRequest | SetWeights) -> None:
        try:
            if isinstance(cmd, AddRequest):
                self._add(cmd)
            elif isinstance(cmd, AbortRequest):
                out = self.core.abort(cmd.request_id)
                if out is not None:
                    self._deliver([out])
            else:
                self.core.set_weights(cmd.weights, cmd.version)
        except Exception:  # noqa: BLE001 - one bad command (or bad weights) must not stop the engine
            log.exception("engine command %s failed", type(cmd).__name__)
            if isinstance(cmd, AddRequest):
                self._deliver(self.core.fail([cmd.request.request_id], "engine error while admitting the request"))

    def _add(self, cmd: AddRequest) -> None:
        request_id = cmd.request.request_id
        if cmd.channel.closed:  # the consumer left before the request even started
            self._release(request_id)
            cmd.channel.close()
            return
        self._channels[request_id] = cmd.channel
        self.core.add(cmd.request, cmd.tracker)

    def _shutdown(self, message: str) -> None:
        outputs = self.core.finish_all("abort", message)
        # Requests still in the command queue never started: close their streams too.
        while True:
            try:
                cmd = self._commands.get_nowait()
            except queue.Empty:
                break
            if isinstance(cmd, AddRequest):
                self._channels[cmd.request.request_id] = cmd.channel
                outputs.append(cmd.tracker.finish("abort", 0, message))
        self._deliver(outputs)

    def _release(self, request_id: str) -> None:
        with self._lock:
            self._unfinished.discard(request_id)

    def _deliver(self, outputs: list[RequestOutput]) -> None:
        """Hand deltas to their streams; a finished request's id becomes free again."""
        observer = self.core.observer
        if observer is not None:
            observer.on_outputs(outputs)
        deliveries: list[tuple[StreamChannel, RequestOutput]] = []
        for out in outputs:
            if out.finished:
                channel = self._channels.pop(out.request_id, None)
                self._release(out.request_id)
            else:
                channel = self._channels.get(out.request_id)
            if channel is not None:
                deliveries.append((channel, out))
        StreamChannel.send_all(deliveries)


__all__ = ["AsyncEngine", "EngineConfig", "EngineStats", "RequestRejected", "RequestStream"]
