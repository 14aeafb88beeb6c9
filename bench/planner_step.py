"""Planner micro-benchmark: Python cost of one schedule() + update_from_output() step.

Decode steady state with `--running` requests (default 64, the engine's max_num_seqs), and the
cost of admitting a long prompt whose prefix is cached (hashing + lookup). Pure Python, no model.
Prints a human summary, then one JSON line (the last line) for scripts.

    python bench/planner_step.py [--running 64] [--steps 2000] [--prompt 512]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # last: its kernels/ would shadow HF's (tests/conftest.py)

from fairgate.backends.local.kv_cache.block_manager import BlockManager  # noqa: E402
from fairgate.scheduler.request import SchedRequest  # noqa: E402
from fairgate.scheduler.scheduler import Scheduler, SchedulerConfig  # noqa: E402


def decode_steady_state(running: int, steps: int, prompt: int, block_size: int) -> tuple[float, float]:
    """(wall, CPU) microseconds per step with `running` requests all decoding."""
    num_blocks = running * ((prompt + steps + 2 * block_size) // block_size + 1)
    sched = Scheduler(
        SchedulerConfig(max_num_seqs=running, max_num_batched_tokens=max(512, running), max_model_len=1 << 20),
        BlockManager(num_blocks, block_size),
    )
    shared = list(range(prompt // 2))  # half of every prompt is a shared system prompt
    for i in range(running):
        tail = [100_000 + i * prompt + j for j in range(prompt - len(shared))]
        sched.add_request(SchedRequest(f"r{i}", shared + tail, 1 << 20, arrival_time=float(i), cache_salt="t"))
    while any(r.num_computed_tokens < r.num_prompt_tokens for r in sched.requests.values()):
        plan = sched.schedule()  # prefill phase, not timed
        sched.update_from_output(plan, {c.request_id: 1 for c in plan.chunks if c.sample})
    assert sched.num_running == running
    t0, c0 = time.perf_counter(), time.process_time()
    for step in range(steps):
        plan = sched.schedule()
        sched.update_from_output(plan, {c.request_id: step for c in plan.chunks})
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert len(plan.chunks) == running and not plan.preempted
    return wall / steps * 1e6, cpu / steps * 1e6


def cached_admission(prompt: int, block_size: int, repeats: int) -> float:
    """CPU microseconds to admit a prompt whose prefix is cached (hash, look up, allocate)."""
    bm = BlockManager(4 * prompt // block_size + 8, block_size)
    sched = Scheduler(SchedulerConfig(max_num_batched_tokens=prompt, max_model_len=1 << 20), bm)
    tokens = list(range(prompt))
    sched.add_request(SchedRequest("warm", tokens, 1, cache_salt="t"))
    plan = sched.schedule()
    sched.update_from_output(plan, {"warm": 0})
    sched.finish_request("warm")
    c0 = time.process_time()
    for i in range(repeats):
        sched.add_request(SchedRequest(f"q{i}", tokens, 1, cache_salt="t"))
        plan = sched.schedule()
        sched.abort_request(f"q{i}")
    elapsed = time.process_time() - c0
    assert plan.chunks[0].num_tokens == block_size  # only the last block was recomputed
    return elapsed / repeats * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--running", type=int, default=64)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--prompt", type=int, default=512)
    p.add_argument("--block-size", type=int, default=16)
    args = p.parse_args()
    step_us, step_cpu_us = decode_steady_state(args.running, args.steps, args.prompt, args.block_size)
    admit_us = cached_admission(4096, args.block_size, 50)
    print(f"decode step, {args.running} running: {step_us:.1f} us/step wall, "
          f"{step_cpu_us:.1f} us/step CPU ({step_cpu_us / args.running:.2f} us/request)")
    print(f"admit a 4096-token prompt with a cached prefix: {admit_us:.0f} us CPU")
    print(json.dumps({
        "bench": "planner_step",
        "num_running": args.running,
        "steps": args.steps,
        "us_per_step": round(step_us, 1),
        "cpu_us_per_step": round(step_cpu_us, 1),
        "cpu_us_per_request": round(step_cpu_us / args.running, 3),
        "cached_admission_4096_us": round(admit_us, 1),
        "python": sys.version.split()[0],
    }))


if __name__ == "__main__":
    main()
