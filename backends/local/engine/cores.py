"""Cores for each job (`--cpu-cores`): the engine's compute threads on a set of cores, the rest of
the process (the event loop, tokenizer, detokenizer, the gateway's own work when embedded) on the
cores left.

The compute threads split every step's work into parallel regions and wait for each other at
every region's end, so one compute thread that the OS takes off its core for the event loop or a
client holds up the rest (issue 39). Pinning keeps them apart where the machine has cores to
spare. Linux affinity is per thread and inherited by the threads a thread starts: the engine
thread pins itself before its first parallel region, so the OpenMP workers it starts run on the
same cores; the thread that builds the engine (a server's event loop) moves to the cores left,
and so do the threads it starts afterwards. The compute thread count follows the set's size.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CorePlan:
    compute: frozenset[int]  # the engine thread and its OpenMP workers
    rest: frozenset[int]  # everything else in the process; empty: shares the compute cores

    def describe(self) -> str:
        rest = f"cores {format_cores(self.rest)}" if self.rest else "the same cores (none left)"
        return (f"engine compute: cores {format_cores(self.compute)} ({len(self.compute)} thread{'s' if len(self.compute) > 1 else ''}); "
                f"event loop, tokenizer and the rest: {rest}")


def parse_cores(spec: str, allowed: frozenset[int] | None = None) -> frozenset[int]:
    """"0-3,6" -> {0, 1, 2, 3, 6}; ValueError naming what is wrong (syntax, or a core this
    process may not run on). ("auto" is `plan_cores`'.)"""
    cores: set[int] = set()
    try:
        for part in spec.split(","):
            lo, _, hi = part.strip().partition("-")
            first, last = int(lo), int(hi or lo)
            if first < 0 or last < first:
                raise ValueError
            cores.update(range(first, last + 1))
    except ValueError:
        raise ValueError(f"cpu cores must be a list like 0-3,6, not {spec!r}") from None
    allowed = allowed if allowed is not None else frozenset(os.sched_getaffinity(0))
    if not cores <= allowed:
        raise ValueError(f"cpu cores {format_cores(frozenset(cores - allowed))} are not available to this "
                         f"process (it may run on {format_cores(frozenset(allowed))})")
    return frozenset(cores)


def plan_cores(spec: str, allowed: frozenset[int] | None = None) -> CorePlan | None:
    """The compute cores `spec` names, and the rest of this process's cores. "auto": with more
    than two cores, the first for the rest and every other one for compute (a container's cpuset:
    one core for the event loop, tokenizer and HTTP, the others for the model); with two or fewer,
    None (no pinning: one compute thread alone would lose more than the event loop costs).
    `allowed`: the cores this process may run on (default: its affinity)."""
    allowed = allowed if allowed is not None else frozenset(os.sched_getaffinity(0))
    if spec == "auto":
        if len(allowed) <= 2:
            return None
        return CorePlan(allowed - {min(allowed)}, frozenset({min(allowed)}))
    compute = parse_cores(spec, allowed)
    return CorePlan(compute, allowed - compute)


def pin_this_thread(cores: frozenset[int]) -> None:
    """Run the calling thread (and the threads it starts from now on) on `cores` only."""
    if cores:
        os.sched_setaffinity(0, cores)  # 0: the calling thread


def format_cores(cores: frozenset[int]) -> str:
    """{0, 1, 2, 5} -> "0-2,5"."""
    runs: list[list[int]] = []  # [first, last] of each run of consecutive cores
    for c in sorted(cores):
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


# How long the compute threads spin at a barrier before they sleep: libgomp's GOMP_SPINCOUNT, in
# `pause` iterations (~140 cycles each on Intel since Skylake: about 50 µs at 1,000). Its default
# (300,000 spins, milliseconds) keeps a waiting thread on its core while the sibling it waits for
# has been preempted by anything else on the machine; sleeping at once costs a futex wake-up per
# parallel region when nothing else runs. 110m in-process beside one busy process: 1,000 spins
# 140 / 145 tok/s, 4,000 134 / 137, 300,000 42 / 40; alone the same within noise (24 requests),
# 0.96x on the 64-request benchmark (docs/engine-performance.md, issue 39). Set before the OpenMP
# runtime loads (torch's import).
OMP_SPIN_COUNT = 1000


def default_omp_wait(environ: MutableMapping[str, str] | None = None) -> bool:
    """Bound the compute threads' barrier spin (`OMP_SPIN_COUNT`) unless the environment already
    says how OpenMP threads wait (OMP_WAIT_POLICY or GOMP_SPINCOUNT). Call it before torch is
    imported: libgomp reads it once, when it loads. True where it set the default."""
    env = os.environ if environ is None else environ
    if "OMP_WAIT_POLICY" in env or "GOMP_SPINCOUNT" in env:
        return False
    env["GOMP_SPINCOUNT"] = str(OMP_SPIN_COUNT)
    return True


def shorten_gil_switch(seconds: float) -> None:
    """Make Python's GIL switch interval at most `seconds` for the whole process. The engine
    thread takes the GIL back after each native call of a step; a busy Python thread beside it
    (the embedded gateway's event loop under load, detectors) keeps it for up to the interval
    each time. 110m in-process beside one busy Python thread (Emerald Rapids, 2 cores, nothing
    else running): 5 ms (Python's) 80.7 / 80.3 tok/s, 0.5 ms 136.8 / 135.5, 0.2 ms 144.3 / 146.5,
    0.1 ms 141.7 / 143.9; alone 280-290 either way."""
    if sys.getswitchinterval() > seconds:
        sys.setswitchinterval(seconds)
