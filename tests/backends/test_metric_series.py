"""The lock-free histogram and counter expose exactly what prometheus_client's own would for the
same observations: same names, help, labels, buckets, counts and sums (and `_created`)."""

from __future__ import annotations

import math
import random
import threading
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from fairgate.backends.metric_series import FastCounter, FastHistogram

BUCKETS = (0.001, 0.01, 0.1, 0.5, 1.0, 2.5)


def _pair(fast: bool) -> tuple[CollectorRegistry, Any, Any, Any]:
    r = CollectorRegistry()
    h, c = (FastHistogram, FastCounter) if fast else (Histogram, Counter)
    return (r, h("lat_seconds", "Latency.", ("tenant", "route"), registry=r, buckets=BUCKETS),
            c("tokens", "Tokens.", ("tenant",), registry=r), h("plain_seconds", "No labels.", registry=r))


def _feed(parts: tuple[CollectorRegistry, Any, Any, Any], seed: int) -> None:
    rng = random.Random(seed)
    _, hist, counter, plain = parts
    values = [0.0, 0.001, 0.0010001, 2.5, 3.0, math.inf, -1.0, 1e-9, *BUCKETS]
    for _ in range(400):
        v = rng.choice(values) if rng.random() < 0.3 else rng.expovariate(3.0)
        hist.labels(rng.choice("ab"), rng.choice(("/x", "/y"))).observe(v)
        counter.labels(rng.choice("abc")).inc(rng.choice((1, 0, 7, 0.5)))
        plain.observe(v)


def _samples(r: CollectorRegistry) -> list[tuple[Any, ...]]:
    out = []
    for family in text_string_to_metric_families(generate_latest(r).decode()):
        for s in family.samples:
            value = "created" if s.name.endswith("_created") else s.value  # a timestamp: compared apart
            out.append((family.name, family.documentation, family.type, s.name, sorted(s.labels.items()), value))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_the_exposition_is_the_librarys(seed: int) -> None:
    ours, theirs = _pair(fast=True), _pair(fast=False)
    _feed(ours, seed)
    _feed(theirs, seed)
    assert _samples(ours[0]) == _samples(theirs[0])
    assert generate_latest(ours[0]).count(b"_created") == generate_latest(theirs[0]).count(b"_created") > 0


def test_nan_and_bad_amounts_behave_as_in_the_library() -> None:
    for fast in (True, False):
        r, hist, counter, _ = _pair(fast)
        hist.labels("a", "/x").observe(float("nan"))  # counted in no bucket; the sum becomes NaN
        with pytest.raises(ValueError, match="non-negative"):
            counter.labels("a").inc(-1)
        with pytest.raises(ValueError):
            hist.observe(1.0)  # a parent with label names is not observable
        with pytest.raises(ValueError):
            counter.inc()
        text = generate_latest(r).decode()
        assert 'lat_seconds_count{route="/x",tenant="a"} 0.0' in text and "lat_seconds_sum" in text
        assert 'lat_seconds_sum{route="/x",tenant="a"} NaN' in text


def test_a_scrape_beside_the_writer_sees_a_consistent_histogram() -> None:
    """One writer thread, scrapes from another: +Inf bucket and _count always agree, and the
    final figures are exact."""
    r, hist, counter, _ = _pair(fast=True)
    child, tokens = hist.labels("a", "/x"), counter.labels("a")
    done = threading.Event()

    def write() -> None:
        for i in range(50_000):
            child.observe((i % 7) / 3)
            tokens.inc(2)
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    while not done.is_set():
        samples = {(s.name, s.labels.get("le")): s.value
                   for f in text_string_to_metric_families(generate_latest(r).decode()) for s in f.samples}
        assert samples[("lat_seconds_bucket", "+Inf")] == samples[("lat_seconds_count", None)]
    writer.join()
    assert child._counts[-1] == 0 and sum(child._counts) == 50_000 and tokens._count == 100_000


def test_exemplars_are_refused_by_name() -> None:
    _, hist, counter, _ = _pair(fast=True)
    with pytest.raises(ValueError, match="FastHistogram keeps no exemplars"):
        hist.labels("a", "/x").observe(1.0, {"trace_id": "t"})
    with pytest.raises(ValueError, match="FastCounter keeps no exemplars"):
        counter.labels("a").inc(1, {"trace_id": "t"})
