"""Our hand-written upstream clients against the libraries they stand in for, in one process:
`backends/http1.py` (HTTP1Pool) vs httpx, and `gateway/quota/resp.py` (RespClient) vs redis-py
(asyncio, with hiredis when importable). CPU time of this process per call (time.process_time,
so other load on a shared machine counts little), rounds alternated A/B/A/B.

    python bench/upstream_clients.py [--calls 2000] [--concurrency 16] [--rounds 4]

HTTP: POST a chat body to an instant upstream (its own process) and read the whole JSON
answer; and a streamed answer of 8 chunks read to the end. RESP: EVALSHA of a small script
(the shape of a quota call: a few keys touched, one reply). Prints a table, then a last line
of JSON: per-call CPU in microseconds for each client and the library/ours ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # last: its kernels/ would shadow HF's (tests/conftest.py)

import httpx  # noqa: E402
import orjson  # noqa: E402
import redis.asyncio as aredis  # noqa: E402

from fairgate.backends.http1 import HTTP1Pool, Origin  # noqa: E402
from fairgate.gateway.quota.resp import RespClient  # noqa: E402

REDIS_URL = "redis://127.0.0.1:6379/0"
BODY = orjson.dumps({"model": "up", "messages": [{"role": "user", "content": "Say hello in five words"}],
                     "max_tokens": 8})
SCRIPT = """
local k = ARGV[1]
redis.call('INCRBY', k .. ':a', ARGV[2])
redis.call('EXPIRE', k .. ':a', 60)
return {0, redis.call('GET', k .. ':a')}
"""


async def cpu_per_call(call: Callable[[], Awaitable[object]], calls: int, concurrency: int) -> float:
    """Microseconds of this process's CPU per call, `concurrency` calls in flight."""
    per = calls // concurrency

    async def worker() -> None:
        for _ in range(per):
            await call()

    await asyncio.gather(*(worker() for _ in range(2)))  # warm the pools
    t0 = time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return (time.process_time() - t0) / (per * concurrency) * 1e6


def http_calls(base: str) -> dict[str, Callable[[], Awaitable[object]]]:
    pool = HTTP1Pool()
    origin = Origin.parse(base)
    headers = b"Content-Type: application/json\r\n"
    client = httpx.AsyncClient(base_url=base, timeout=30, limits=httpx.Limits(max_connections=64,
                                                                             max_keepalive_connections=64))
    stream_body = orjson.dumps({**orjson.loads(BODY), "stream": True})

    async def ours() -> object:
        resp = await pool.post(origin, "/chat/completions", headers, BODY, 30)
        return orjson.loads(await resp.read())

    async def ours_stream() -> object:
        resp = await pool.post(origin, "/chat/completions", headers, stream_body, 30)
        return [b async for b in resp.iter_bytes()]

    async def lib() -> object:
        r = await client.post("/chat/completions", content=BODY, headers={"content-type": "application/json"})
        return orjson.loads(r.content)

    async def lib_stream() -> object:
        async with client.stream("POST", "/chat/completions", content=stream_body,
                                 headers={"content-type": "application/json"}) as r:
            return [b async for b in r.aiter_bytes()]

    return {"http ours": ours, "http httpx": lib, "sse ours": ours_stream, "sse httpx": lib_stream}


def resp_calls(prefix: str) -> dict[str, Callable[[], Awaitable[object]]]:
    import hashlib

    sha = hashlib.sha1(SCRIPT.encode()).hexdigest()
    ours_client = RespClient(REDIS_URL)
    lib_client = aredis.Redis.from_url(REDIS_URL, max_connections=64)

    async def ours() -> object:
        try:
            return await ours_client.execute("EVALSHA", sha, 0, prefix, 1)
        except Exception:  # NOSCRIPT on the first call
            return await ours_client.execute("EVAL", SCRIPT, 0, prefix, 1)

    async def lib() -> object:
        return await lib_client.evalsha(sha, 0, prefix, 1)

    return {"resp ours": ours, "resp redis-py": lib}


async def measure(args: argparse.Namespace, base: str) -> dict[str, list[float]]:
    prefix = f"bench-clients-{uuid.uuid4().hex[:8]}"
    calls = {**http_calls(base), **resp_calls(prefix)}
    await calls["resp ours"]()  # loads the script
    results: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(args.rounds):
        for name, call in calls.items():  # alternated: every client once per round
            results[name].append(await cpu_per_call(call, args.calls, args.concurrency))
    r = aredis.Redis.from_url(REDIS_URL)
    await r.delete(f"{prefix}:a")
    await r.aclose()
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop")
    args = ap.parse_args()
    up = subprocess.Popen([sys.executable, "-m", "tests.helpers.upstream", "--port", "0"], cwd=ROOT,
                          stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        port = int(up.stdout.readline().split()[1])  # type: ignore[union-attr]
        runner = asyncio.run
        if args.loop == "uvloop":  # the gateway's loop under uvicorn
            import uvloop

            runner = uvloop.run
        results = runner(measure(args, f"http://127.0.0.1:{port}/v1"))
    finally:
        up.terminate()
        up.wait()
    med = {name: round(statistics.median(v), 1) for name, v in results.items()}
    print(f"{'client':<16}{'median us/call':>16}{'rounds':>40}")
    for name, values in results.items():
        print(f"{name:<16}{med[name]:>16}{'  '.join(f'{v:.0f}' for v in values):>40}")
    try:
        import hiredis  # noqa: F401

        parser = "hiredis"
    except ImportError:
        parser = "python"
    out = {"http_ours_us": med["http ours"], "http_httpx_us": med["http httpx"],
           "http_ratio": round(med["http httpx"] / med["http ours"], 2),
           "sse_ours_us": med["sse ours"], "sse_httpx_us": med["sse httpx"],
           "sse_ratio": round(med["sse httpx"] / med["sse ours"], 2),
           "resp_ours_us": med["resp ours"], "resp_redispy_us": med["resp redis-py"],
           "resp_ratio": round(med["resp redis-py"] / med["resp ours"], 2), "redis_py_parser": parser,
           "calls": args.calls, "concurrency": args.concurrency, "loop": args.loop, "rounds": args.rounds,
           "load_avg_1m": os.getloadavg()[0]}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
