"""What the fleet fair queue's Redis clock costs per request (gateway/request/pool_clock.py).

Drives a FleetGate on a real PoolClock against the Redis on 127.0.0.1:6379 (a fresh key prefix,
deleted afterwards), no HTTP: each request takes a slot and gives it back, first one at a time
(nothing waits: one ADMIT + one RELEASE), then 64 at once on 8 slots with two tenants (a
backlog: rounds, wakes). Reports per request: Redis calls, wall time waiting on them, the
gateway's CPU, and Redis's own CPU (INFO commandstats: evalsha usec). Last line JSON.

    python bench/pool_clock_cost.py [--requests 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # last: its kernels/ would shadow HF's (tests/conftest.py)

from fairgate.backends.pool_fleet_gate import FleetGate  # noqa: E402
from fairgate.gateway.request.pool_clock import PoolClock  # noqa: E402

URL = "redis://127.0.0.1:6379/0"


def redis_usec(r: redis.Redis) -> float:
    stats = r.info("commandstats")
    return sum(float(v["usec"]) for k, v in stats.items() if k in ("cmdstat_evalsha", "cmdstat_eval"))


async def drive(gate: FleetGate, requests: int, concurrency: int) -> None:
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem, gate.slot("a" if i % 4 else "b", 24.0, lambda: 16.0):
            await asyncio.sleep(0 if concurrency == 1 else 0.002)

    await asyncio.gather(*(one(i) for i in range(requests)))


async def measure(name: str, requests: int, concurrency: int, slots: int) -> dict[str, float | str]:
    prefix = f"fgbench-clock-{time.time_ns()}"
    r = redis.Redis.from_url(URL)
    clock = PoolClock(URL, prefix, 30)
    gate = FleetGate(lambda: {"r0": slots // 2, "r1": slots - slots // 2}, {"a": 3.0, "b": 1.0}.__getitem__,
                     clock.ledger("p"))
    await drive(gate, 50, concurrency)  # scripts loaded, connections open
    calls0, wait0, usec0 = clock.calls, clock.seconds, redis_usec(r)
    cpu0, t0 = time.process_time(), time.perf_counter()
    await drive(gate, requests, concurrency)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    out: dict[str, float | str] = {
        "case": name, "requests_per_s": round(requests / wall),
        "redis_calls_per_request": round((clock.calls - calls0) / requests, 2),
        "redis_wait_us_per_request": round(1e6 * (clock.seconds - wait0) / requests, 1),
        "gateway_cpu_us_per_request": round(1e6 * cpu / requests, 1),
        "redis_cpu_us_per_request": round((redis_usec(r) - usec0) / requests, 1),
    }
    await gate.aclose()
    await clock.aclose()
    keys = list(r.scan_iter(f"{prefix}:*"))
    if keys:
        r.delete(*keys)
    r.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=2000)
    args = ap.parse_args(argv)
    rows = [asyncio.run(measure("one at a time, no wait", args.requests, 1, 8)),
            asyncio.run(measure("64 at once on 8 slots", args.requests, 64, 8))]
    cols = [k for k in rows[0] if k != "case"]
    print(f"{'case':<26}" + "".join(f"{c:>28}" for c in cols))
    for row in rows:
        print(f"{row['case']:<26}" + "".join(f"{row[c]:>28}" for c in cols))
    print(json.dumps({"no_wait": rows[0], "backlog": rows[1]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
