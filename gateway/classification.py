"""Personal-data classification off the event loop, with a time cap, failing closed.

`Router.decide` awaits `Classifier.assess`, which runs `policies.residency.assess` in a small
worker thread pool. A request whose classification takes longer than `timeout_s`, or whose
detectors raise, is treated as sensitive (local backends only) and counted in
`fairgate_classification_fail_closed_total{reason="timeout"|"error"}`. The pool is small and
bounded: a flood of pathological prompts queues there (and times out closed) instead of
stalling every other request, stream and `/health` on the event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from policies.residency import SensitivityVerdict, assess

FAIL_CLOSED_METRIC = "fairgate_classification_fail_closed"


class Classifier:
    """Time-capped sensitivity assessment in worker threads.

    `timeout_s`: per-request cap (queueing included); `workers`: threads; `registry`: where the
    fail-closed counter is registered (a private one when None).
    """

    def __init__(self, timeout_s: float = 2.0, workers: int = 2,
                 registry: CollectorRegistry | None = None) -> None:
        self.timeout_s = timeout_s
        self.workers = workers
        self.fail_closed = Counter(FAIL_CLOSED_METRIC, "Requests treated as sensitive because their "
                                   "classification timed out or failed.", ("reason",),
                                   registry=registry or CollectorRegistry())
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(self.workers, "fairgate-classify")
            return self._pool

    async def assess(self, texts: Sequence[str], *, data_residency: str = "any", header: str | None = None,
                     patterns: Iterable[str] = (), keywords: Iterable[str] = (),
                     opaque: bool = False) -> SensitivityVerdict:
        """`policies.residency.assess` in a worker; sensitive on timeout or error."""
        kwargs: dict[str, Any] = {"data_residency": data_residency, "header": header,
                                  "patterns": tuple(patterns), "keywords": tuple(keywords), "opaque": opaque}
        if data_residency != "any" or header == "sensitive" or opaque:
            return assess(texts, **kwargs)  # decided without running a detector
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor(), lambda: assess(list(texts), **kwargs))
        try:
            verdict = await asyncio.wait_for(future, self.timeout_s)
        except TimeoutError:
            self.fail_closed.labels("timeout").inc()
            return SensitivityVerdict(True, (), ("classification_timeout",))
        except Exception:  # noqa: BLE001 - any failure keeps the request local
            self.fail_closed.labels("error").inc()
            return SensitivityVerdict(True, (), ("classification_failed",))
        if "classification_failed" in verdict.reasons:
            self.fail_closed.labels("error").inc()
        return verdict

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None


def classifier_for(state: Any) -> Classifier:
    """The app's one classifier (built on first use, its counter on the app's registry)."""
    existing = getattr(state, "classifier", None)
    if existing is None:
        metrics = getattr(state, "metrics", None)
        settings = getattr(state, "settings", None)
        existing = Classifier(timeout_s=float(getattr(settings, "classify_timeout_s", 2.0)),
                              registry=getattr(metrics, "registry", None))
        state.classifier = existing
    return existing
