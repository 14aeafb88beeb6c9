"""Periodic engine stats at info, like vLLM's: every `interval_s` one line with the prompt and
generation throughput of the interval, running and waiting requests, KV-cache use, the
prefix-cache hit rate and preemptions (and speculative acceptance when it runs).

A daemon thread reads `AsyncEngine.stats()` (plain reads, no locks) and logs only while there
is work: an idle engine logs one line when it goes idle, then nothing until work comes back.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fairgate.backends.local.engine.async_engine import AsyncEngine
    from fairgate.backends.local.engine.output import EngineStats

log = logging.getLogger("fairgate.engine.stats")


@dataclass(slots=True)
class Interval:
    """The figures of one interval, from two stats snapshots."""

    prompt_tps: float
    generation_tps: float
    running: int
    waiting: int
    kv_used: float  # share of blocks in use
    hit_rate: float | None  # prompt tokens found cached / looked up, in the interval
    preemptions: int  # in the interval
    spec_acceptance: float | None

    @property
    def busy(self) -> bool:
        return bool(self.running or self.waiting or self.prompt_tps or self.generation_tps)

    def line(self, name: str) -> str:
        text = (f"engine {name}: prompt {self.prompt_tps:.1f} tokens/s, generation {self.generation_tps:.1f} "
                f"tokens/s, running {self.running}, waiting {self.waiting}, KV cache {self.kv_used * 100:.1f}% "
                f"used, prefix cache hit rate "
                f"{'-' if self.hit_rate is None else f'{self.hit_rate * 100:.1f}%'}, preemptions {self.preemptions}")
        if self.spec_acceptance is not None:
            text += f", spec acceptance {self.spec_acceptance * 100:.1f}%"
        return text


def interval(before: EngineStats, after: EngineStats, seconds: float) -> Interval:
    seconds = max(seconds, 1e-9)
    generated = after.generation_tokens - before.generation_tokens
    computed = after.tokens_computed - before.tokens_computed
    # every computed token is a prompt token or the input of a decode step (one per generated token,
    # less the first of each request, which comes out of its prefill): a close upper bound
    prompt = max(computed - generated, 0)
    queries = after.prefix_cache_queries - before.prefix_cache_queries
    drafts = after.spec_draft_tokens - before.spec_draft_tokens
    return Interval(
        prompt_tps=prompt / seconds, generation_tps=generated / seconds,
        running=after.running, waiting=after.waiting,
        kv_used=after.kv_blocks_used / after.kv_blocks_total if after.kv_blocks_total else 0.0,
        hit_rate=(after.prefix_cache_hits - before.prefix_cache_hits) / queries if queries else None,
        preemptions=after.preemptions - before.preemptions,
        spec_acceptance=(after.spec_accepted_tokens - before.spec_accepted_tokens) / drafts if drafts else None)


class EngineStatsLogger:
    """Logs `engine`'s stats every `interval_s` seconds while it has work; `stop()` ends it
    (the engine starts and stops its own, see `EngineConfig.stats_interval_s`)."""

    def __init__(self, engine: AsyncEngine, name: str, interval_s: float = 10.0) -> None:
        self.engine = engine
        self.name = name
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fairgate-engine-stats", daemon=True)
        self._was_busy = False

    def start(self) -> EngineStatsLogger:
        if self.interval_s > 0:
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def log_once(self, before: EngineStats, started: float) -> tuple[EngineStats, float]:
        """Log the interval since (`before`, `started`) if there was work; the new snapshot."""
        now, after = time.monotonic(), self.engine.stats()
        figures = interval(before, after, now - started)
        if figures.busy or self._was_busy:  # the first idle interval is logged once
            log.info("%s", figures.line(self.name))
        self._was_busy = figures.busy
        return after, now

    def _run(self) -> None:
        before, started = self.engine.stats(), time.monotonic()
        while not self._stop.wait(self.interval_s):
            try:
                before, started = self.log_once(before, started)
            except Exception:  # noqa: BLE001 - a stats bug must never take the engine down
                log.exception("engine stats failed")
