"""`--cpu-cores` (issue 39): the engine's compute threads on the cores named, the building thread
(a server's event loop) and the threads it starts later on the others, the same tokens."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from fairgate.backends.local.engine.async_engine import AsyncEngine, EngineConfig
from fairgate.backends.local.engine.cores import (
    OMP_SPIN_COUNT,
    CorePlan,
    default_omp_wait,
    format_cores,
    parse_cores,
    plan_cores,
)
from fairgate.backends.local.engine.types import SamplingParams
from fairgate.gateway.cli import build_parser

CORES = sorted(os.sched_getaffinity(0))


def test_core_lists_are_parsed_and_checked() -> None:
    assert parse_cores(f"{CORES[0]}") == {CORES[0]}
    assert format_cores(frozenset({0, 1, 2, 5, 7, 8})) == "0-2,5,7-8"
    for bad in ("x", "3-1", "-1", ""):
        with pytest.raises(ValueError, match="like 0-3,6"):
            parse_cores(bad)
    with pytest.raises(ValueError, match="not available to this process"):
        parse_cores(f"{CORES[-1] + 1}")
    with pytest.raises(ValueError, match="not available"):
        EngineConfig("m", cpu_cores=f"0-{CORES[-1] + 4}").validate()
    args = build_parser().parse_args(["engine", "--model", "m", "--cpu-cores", f"{CORES[0]}"])
    assert EngineConfig.from_args(args).cpu_cores == f"{CORES[0]}"


def _affinity_of(thread: threading.Thread) -> set[int]:
    assert thread.native_id is not None
    return set(os.sched_getaffinity(thread.native_id))


@pytest.mark.skipif(len(CORES) < 2, reason="needs two cores this process may run on")
def test_compute_and_the_rest_run_on_their_own_cores(tiny_model_dir: Path, caplog) -> None:
    compute, rest = CORES[0], set(CORES[1:])
    mask, threads = os.sched_getaffinity(0), torch.get_num_threads()
    params = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)

    async def generate(engine: AsyncEngine) -> list[int]:
        try:
            return (await engine.generate([5, 6, 7, 8], params)).token_ids
        finally:
            await engine.aclose()

    want = asyncio.run(generate(AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=32))))
    try:
        with caplog.at_level(logging.INFO, logger="fairgate"):
            engine = AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=32, cpu_cores=str(compute)))
        assert torch.get_num_threads() == 1  # one compute thread per core named
        assert _affinity_of(engine._thread) == {compute}
        assert os.sched_getaffinity(0) == rest  # the building thread moved off the compute core
        done = threading.Event()
        later = threading.Thread(target=done.wait)
        later.start()
        assert _affinity_of(later) == rest  # a thread started afterwards inherits the building thread's
        done.set()
        later.join()
        assert asyncio.run(generate(engine)) == want
        assert f"engine compute: cores {compute} (1 thread); event loop, tokenizer and the rest: cores " \
               f"{format_cores(frozenset(rest))}" in caplog.text
    finally:
        os.sched_setaffinity(0, mask)
        torch.set_num_threads(threads)
    assert plan_cores(str(compute)).rest == frozenset(rest)


def test_auto_leaves_one_core_to_the_rest_where_there_are_more_than_two() -> None:
    eight = frozenset(range(8, 16))  # a container's cpuset
    assert plan_cores("auto", eight) == CorePlan(frozenset(range(9, 16)), frozenset({8}))
    assert plan_cores("auto", frozenset({2, 3})) is None  # two cores: no pinning
    assert plan_cores("10-15", eight) == CorePlan(frozenset(range(10, 16)), frozenset({8, 9}))
    with pytest.raises(ValueError, match="cpu cores 0-1 are not available"):
        plan_cores("0-1", eight)
    assert (plan_cores("auto") is None) == (len(CORES) <= 2)
    EngineConfig("m", cpu_cores="auto").validate()


def test_the_barrier_spin_is_bounded_unless_the_environment_says_otherwise(tmp_path: Path) -> None:
    env: dict[str, str] = {}
    assert default_omp_wait(env) and env == {"GOMP_SPINCOUNT": str(OMP_SPIN_COUNT)}
    for given in ({"OMP_WAIT_POLICY": "active"}, {"GOMP_SPINCOUNT": "300000"}):
        kept = dict(given)
        assert not default_omp_wait(kept) and kept == given  # the operator's choice stands
    # the command line sets it before anything loads torch (libgomp reads it when it loads)
    script = ("import os, sys\nfrom fairgate.gateway.cli import main\nmain(sys.argv[1:])\n"
              "print(os.environ.get('GOMP_SPINCOUNT'), 'torch' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    env["FAIRGATE_DATABASE_URL"] = f"sqlite:///{tmp_path}/db.sqlite"
    out = subprocess.run([sys.executable, "-c", script, "db", "upgrade"], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    assert out.split()[-2:] == [str(OMP_SPIN_COUNT), "False"]


def test_the_engine_shortens_the_gil_switch_interval_and_never_lengthens_it(tiny_model_dir: Path) -> None:
    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)
        AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=16, gil_switch_interval_ms=None)).close()
        assert sys.getswitchinterval() == pytest.approx(0.005)  # None: Python's own
        AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=16)).close()
        assert sys.getswitchinterval() == pytest.approx(0.0005)  # the default, 0.5 ms
        sys.setswitchinterval(0.0001)
        AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=16)).close()
        assert sys.getswitchinterval() == pytest.approx(0.0001)  # already shorter: kept
    finally:
        sys.setswitchinterval(before)
    args = build_parser().parse_args(["engine", "--model", "m", "--gil-switch-interval-ms", "0.2"])
    assert EngineConfig.from_args(args).gil_switch_interval_ms == 0.2
    with pytest.raises(ValueError, match="gil_switch_interval_ms"):
        EngineConfig("m", gil_switch_interval_ms=0).validate()
