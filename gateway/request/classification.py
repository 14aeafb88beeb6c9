"""Personal-data classification off the event loop, with a time cap, failing closed.

`Router.decide` awaits `Classifier.assess`, which runs `policies.residency.assess` in a small
worker pool: processes for the app (the detectors hold the GIL in long C calls -- regex scans,
`str.translate` -- which would still pause the event loop from a thread), threads for a bare
`Router` (tests, benches). A request whose classification takes longer than `timeout_s`, or
whose detectors raise, is treated as sensitive (local backends only) and counted in
`fairgate_classification_fail_closed_total{reason="timeout"|"error"}`. The pool is small and
bounded: a flood of pathological prompts queues there (and times out closed) instead of
stalling every other request, stream and `/health` on the event loop. Worker processes start
once (spawned, detectors warmed up); the time cap counts from when they are ready.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import multiprocessing
import os
import threading
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter

from fairgate.policies.detection_options import DEFAULT_OPTIONS, DetectionOptions
from fairgate.policies.residency import SensitivityVerdict, assess

if TYPE_CHECKING:
    from fairgate.gateway.request.state import ClassifierState

FAIL_CLOSED_METRIC = "fairgate_classification_fail_closed"


class Classifier:
    """Time-capped sensitivity assessment in worker threads or processes.

    `timeout_s`: per-request cap (queueing included); `workers`: pool size; `processes`: worker
    processes instead of threads; `registry`: where the fail-closed counter is registered (a
    private one when None); `inline_chars`: prompts up to this size are classified right away
    on the caller's thread (with the name tagger, 2 KB of text takes ~3-4 ms there; 8 KB 9-14 ms).
    """

    def __init__(self, timeout_s: float = 2.0, workers: int = 2,
                 registry: CollectorRegistry | None = None, processes: bool = False,
                 inline_chars: int = 2048) -> None:
        self.timeout_s = timeout_s
        self.inline_chars = inline_chars
        self.workers = workers
        self.processes = processes
        self._ready: concurrent.futures.Future[bool] | None = None
        self.fail_closed = Counter(FAIL_CLOSED_METRIC, "Requests treated as sensitive because their "
                                   "classification timed out or failed.", ("reason",),
                                   registry=registry or CollectorRegistry())
        self._pool: concurrent.futures.Executor | None = None
        self._lock = threading.Lock()

    def _executor(self) -> concurrent.futures.Executor:
        with self._lock:
            if self._pool is None:
                self._pool = self._start()
            return self._pool

    def _start(self) -> concurrent.futures.Executor:
        if self.processes:
            try:
                # spawn, not fork: the gateway runs threads. Workers watch their parent and exit
                # when it is gone (killed gateways must not leave detector processes behind)
                ctx = multiprocessing.get_context("spawn")
                pool = concurrent.futures.ProcessPoolExecutor(
                    self.workers, mp_context=ctx, initializer=_watch_parent, initargs=(os.getpid(),))
                self._ready = pool.submit(warm_detectors)
                return pool
            except (OSError, ValueError):  # no process support here: threads still work
                self.processes = False
        return concurrent.futures.ThreadPoolExecutor(self.workers, "fairgate-classify")

    def start(self) -> None:
        """Start the workers now (the app does, so the first request does not wait)."""
        self._executor()

    async def assess(self, texts: Sequence[str], *, data_residency: str = "any", header: str | None = None,
                     patterns: Iterable[str] = (), keywords: Iterable[str] = (),
                     opaque: bool = False, options: DetectionOptions = DEFAULT_OPTIONS) -> SensitivityVerdict:
        """`policies.residency.assess` in a worker; sensitive on timeout or error. `options`: the
        tenant's detection options (policies.detection_options)."""
        kwargs: dict[str, Any] = {"data_residency": data_residency, "header": header,
                                  "patterns": tuple(patterns), "keywords": tuple(keywords), "opaque": opaque,
                                  "options": options}
        if data_residency != "any" or header == "sensitive" or opaque:
            return assess(texts, **kwargs)  # decided without running a detector
        if sum(len(t) for t in texts) <= self.inline_chars:
            # small prompts (nearly all): a few hundred µs at worst, cheaper than a hop to a
            # worker, and never queued behind a flood of big ones
            verdict = assess(list(texts), **kwargs)
            if "classification_failed" in verdict.reasons:
                self.fail_closed.labels("error").inc()
            return verdict
        pool = self._executor()
        try:
            if self._ready is not None and not self._ready.done():
                await asyncio.wait_for(asyncio.wrap_future(self._ready), 120)  # workers starting
            future = asyncio.wrap_future(pool.submit(_assess, list(texts), kwargs))
            verdict = await asyncio.wait_for(future, self.timeout_s)
        except TimeoutError:
            self.fail_closed.labels("timeout").inc()
            return SensitivityVerdict(True, (), ("classification_timeout",))
        except Exception as exc:  # noqa: BLE001 - any failure keeps the request local
            if isinstance(exc, concurrent.futures.BrokenExecutor):
                self.close()  # a worker died: start fresh ones next time
            self.fail_closed.labels("error").inc()
            return SensitivityVerdict(True, (), ("classification_failed",))
        if "classification_failed" in verdict.reasons:
            self.fail_closed.labels("error").inc()
        return verdict

    def close(self) -> None:
        """Stop the workers (the app's lifespan does at shutdown)."""
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool, self._ready = None, None


def _assess(texts: list[str], kwargs: dict[str, Any]) -> SensitivityVerdict:
    return assess(texts, **kwargs)


def _watch_parent(parent: int) -> None:
    """In each worker: exit as soon as the gateway process that started it is gone (a queue
    read alone would wait forever, the worker holding the queue's other end itself)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="fairgate-parent-watch", daemon=True).start()


def warm_detectors() -> bool:
    """Build the detectors' tables and load the name tagger's lexicons and weights (a name, so
    the tagger runs), as their first use would: once in each new worker process, and in the
    gateway's own process at start (prompts up to `inline_chars` are classified there), so no
    request pays for it and the tables are built before the app freezes what lives as long as
    it does."""
    assess(["Ayşe Yılmaz, warm up 10000000146"])
    return True


def classifier_for(state: ClassifierState) -> Classifier:
    """The app's one classifier (built on first use, its counter on the app's registry)."""
    if state.classifier is None:
        state.classifier = Classifier(timeout_s=state.settings.classify_timeout_s,
                                      registry=state.metrics.registry, processes=True)
        state.classifier.start()
    return state.classifier
