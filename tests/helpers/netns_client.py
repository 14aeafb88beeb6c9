"""A client to run inside a network namespace: `python -m tests.helpers.netns_client < plan.json`.

The plan: {"concurrency": n, "requests": [{"method", "url", "headers", "json", "stream"}]}.
Prints one JSON list, a result per request in order: {"status", "body"} (parsed JSON, or for a
stream {"lines": [...]}), or {"status": 0, "error": "<transport error>"}.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx


async def one(client: httpx.AsyncClient, sem: asyncio.Semaphore, req: dict[str, Any]) -> dict[str, Any]:
    async with sem:
        try:
            if req.get("stream"):
                async with client.stream(req["method"], req["url"], headers=req.get("headers"),
                                         json=req.get("json")) as r:
                    lines = [line async for line in r.aiter_lines() if line]
                    return {"status": r.status_code, "lines": lines}
            r = await client.request(req["method"], req["url"], headers=req.get("headers"), json=req.get("json"))
            try:
                body: Any = r.json()
            except ValueError:
                body = r.text
            return {"status": r.status_code, "body": body}
        except httpx.HTTPError as exc:
            return {"status": 0, "error": type(exc).__name__}


async def run(plan: dict[str, Any]) -> list[dict[str, Any]]:
    sem = asyncio.Semaphore(plan.get("concurrency", 1))
    async with httpx.AsyncClient(timeout=plan.get("timeout_s", 60)) as client:
        return await asyncio.gather(*(one(client, sem, r) for r in plan["requests"]))


if __name__ == "__main__":
    print(json.dumps(asyncio.run(run(json.load(sys.stdin)))))
