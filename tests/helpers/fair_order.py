"""Watch the fair queue decide: requests queued behind a blocker in an engine with one
sequence slot finish strictly in the order the queue admits them."""

from __future__ import annotations

import asyncio
from typing import Any

from fairgate.backends.local.engine.types import SamplingParams

SHORT = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)
BLOCKER = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)


async def completion_order(engine: Any, requests: list[tuple[str, str]], base: int) -> list[str]:
    """Queue a blocker, then `requests` ((name, tenant), in this order) behind it; return the
    names in completion order. `engine` must run with max_num_seqs=1."""
    order: list[str] = []

    async def run(name: str, tenant: str, i: int) -> None:
        prompt = [base + 10 * i + k for k in range(8)]  # distinct, under one block: no cache hits
        await engine.generate(prompt, SHORT, request_id=name, tenant=tenant)
        order.append(name)

    # tasks start in creation order, so the engine receives the adds in this order
    blocker = asyncio.create_task(engine.generate([3] * 8, BLOCKER, request_id=f"z{base}", tenant="z"))
    tasks = [asyncio.create_task(run(n, t, i)) for i, (n, t) in enumerate(requests)]
    await asyncio.gather(blocker, *tasks)
    return order
