"""The cyclic garbage collector in a serving process: when its full passes may run (issue 36).

CPython stops the whole process for a full (generation 2) collection, for a time that grows with
every container object it tracks. With Python's thresholds (700, 10, 10) a full pass may start
after every tenth collection of the middle generation, and a serving process under load reaches
that every few seconds: in `bench/fairness_live.py`'s run (2-core Zen 4 VM, 2026-12-08; about
60 s of serving after startup) each engine server made 2 to 3 full collections of 18 to 145 ms
while it served, and the flood's gateway one of 45 to 110 ms. Each stops the engine thread at its
next step, or the gateway's event loop, and every stream in flight with it: that is where a light
tenant's p99 under a flood went (0.078 to 0.354 s against 0.058 to 0.095 s without them).

Two settings keep them out of serving without letting garbage pile up:
- what startup built (the model, imports, the app, the detectors' tables) is frozen out of the
  collector: it lives as long as the process, and a full pass no longer walks it;
- a full collection waits for `threshold[2]` collections of the middle generation, here 100
  (`gc.set_threshold`; Python's rule that the old generation must also have grown by a quarter
  still holds on top): full passes come ten times less often, none in the run above, while
  reference counting frees what is not in a cycle at once and the young collections still take
  the cycles that die young, as most of a request's do.

The setting: `--gc-threshold` on `fairgate engine`, `FAIRGATE_GC_THRESHOLD` on the gateway
(`"700,10,100"`; `"700,10,10"` is Python's own).
"""

from __future__ import annotations

import gc

DEFAULT_THRESHOLD = (700, 10, 100)


def parse_threshold(spec: str | tuple[int, ...] | list[int]) -> tuple[int, int, int]:
    """"700,10,100" -> (700, 10, 100); ValueError naming what is wrong."""
    try:
        parts = tuple(int(x) for x in (spec.split(",") if isinstance(spec, str) else spec))
    except ValueError:
        raise ValueError(f"gc threshold must be three integers like 700,10,100, not {spec!r}") from None
    if len(parts) != 3 or parts[0] < 1 or parts[1] < 1 or parts[2] < 1:
        raise ValueError(f"gc threshold must be three integers >= 1 like 700,10,100, not {spec!r}")
    return parts[0], parts[1], parts[2]


def settle(threshold: tuple[int, int, int] = DEFAULT_THRESHOLD) -> None:
    """Once startup is done: collect what it left, freeze the rest out of the collector's full
    passes, and set the thresholds."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*threshold)
