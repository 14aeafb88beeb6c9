"""Prometheus histograms and counters whose children count in plain numbers.

prometheus_client's `Histogram.observe` takes two locks and walks the buckets in Python, and
`Counter.inc` takes one lock; the gateway observes four histograms and five counters for every
request, and the engine one histogram for every generated token. Here a child's observation is a
binary search and two additions with no lock, and everything else (names, labels, buckets, help,
the samples a scrape reads, `_created`) is the library's own: these are its `Histogram` and
`Counter` with the child's storage replaced, and `tests/backends/test_metric_series.py` holds
their exposition to the library's, sample for sample.

No lock is safe because each series has one writer (the event loop, or the engine thread) and a
scrape only reads: a reader sees each number either before or after an addition. A scrape may
see a histogram's sum one observation apart from its buckets, as the library's two locks allow
too. Not for prometheus_client's multiprocess mode (PROMETHEUS_MULTIPROC_DIR), which these
series do not write to; fairgate does not use it.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterable
from typing import Any

from prometheus_client import Counter, Histogram
from prometheus_client import metrics as _library
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

__all__ = ["FastCounter", "FastHistogram"]


def _refuse(metric: Histogram | Counter) -> None:
    metric._raise_if_not_observable()  # a parent with label names: the library's ValueError
    raise ValueError(f"{type(metric).__name__} keeps no exemplars")


class FastHistogram(Histogram):
    """`Histogram` whose children count observations in a list (one writer per series)."""

    _observable = False  # set on a child (and on a metric without labels) only

    def _metric_init(self) -> None:
        self._counts = [0] * len(self._upper_bounds)
        self._total = 0.0
        self._created = time.time()
        self._observable = True

    def observe(self, amount: float, exemplar: Any = None) -> None:
        if exemplar or not self._observable:
            _refuse(self)
        self._total += amount
        if amount == amount:  # NaN falls in no bucket, as in the library; +Inf in the last
            self._counts[bisect_left(self._upper_bounds, amount)] += 1

    def _child_samples(self) -> Iterable[Sample]:
        samples = []
        acc = 0.0
        for bound, count in zip(self._upper_bounds, list(self._counts), strict=True):
            acc += count
            samples.append(Sample("_bucket", {"le": floatToGoString(bound)}, acc, None, None))
        samples.append(Sample("_count", {}, acc, None, None))
        if self._upper_bounds[0] >= 0:
            samples.append(Sample("_sum", {}, self._total, None, None))
        if _library._use_created:
            samples.append(Sample("_created", {}, self._created, None, None))
        return tuple(samples)


class FastCounter(Counter):
    """`Counter` whose children add in a float (one writer per series)."""

    _observable = False

    def _metric_init(self) -> None:
        self._count = 0.0
        self._created = time.time()
        self._observable = True

    def inc(self, amount: float = 1, exemplar: Any = None) -> None:
        if exemplar or not self._observable:
            _refuse(self)
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        self._count += amount

    def reset(self) -> None:
        self._count = 0.0
        self._created = time.time()

    def _child_samples(self) -> Iterable[Sample]:
        sample = Sample("_total", {}, self._count, None, None)
        if _library._use_created:
            return (sample, Sample("_created", {}, self._created, None, None))
        return (sample,)
