"""What a fault scenario measured, and the small load generator the scenarios share."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

COLUMNS = ("scenario", "served", "refused", "rows_written", "rows_lost", "audit_lost", "leaked", "kv_before",
           "kv_after", "recover_s")


@dataclass(slots=True)
class Figures:
    scenario: str
    served: int = 0  # answered 200
    refused: int = 0  # answered with a clear 4xx/503 in OpenAI's format
    rows_written: int = 0  # usage rows in the database for the scenario's tenants
    rows_lost: int = 0  # admitted requests without a usage row (must be 0)
    audit_lost: int = 0  # routing decisions without an audit row (must be 0)
    leaked: int = 0  # concurrency slots still held after the load ended (must be 0)
    recover_s: float | None = None  # fault cleared → first request admitted again
    kv_before: int | None = None  # engine KV blocks in use before the scenario (None: no engine)
    kv_after: int | None = None  # ... and once it is over (must equal kv_before)
    statuses: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def table(figures: list[Figures]) -> list[str]:
        rows = [COLUMNS] + [tuple("-" if (v := getattr(f, c)) is None else
                                  (f"{v:.1f}" if isinstance(v, float) else str(v)) for c in COLUMNS)
                            for f in figures]
        widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
        return ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in rows]


def chat_body(model: str = "up", max_tokens: int = 2, stream: bool = False) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": "hello there"}], "max_tokens": max_tokens,
            "stream": stream}


async def load(url: str, key: str, duration_s: float, concurrency: int,
               body: dict[str, Any] | None = None, refusals: list[float] | None = None) -> Counter[str]:
    """`concurrency` clients posting back to back for `duration_s`; statuses (with the error
    code for failures, e.g. "503:usage_unavailable") counted, and the monotonic time of each
    refusal appended to `refusals`."""
    seen: Counter[str] = Counter()
    end = time.monotonic() + duration_s
    payload = body or chat_body()

    async def client(c: httpx.AsyncClient) -> None:
        while time.monotonic() < end:
            try:
                r = await c.post(url + "/v1/chat/completions", json=payload)
            except httpx.TransportError as exc:
                seen[f"transport:{type(exc).__name__}"] += 1
                continue
            if r.status_code == 200:
                seen["200"] += 1
                continue
            seen[f"{r.status_code}:{r.json()['error']['code']}"] += 1
            if refusals is not None:
                refusals.append(time.monotonic())
            await asyncio.sleep(0.05)  # a refused client backs off a little, as SDKs do

    async with httpx.AsyncClient(timeout=30, headers={"authorization": f"Bearer {key}"}) as c:
        await asyncio.gather(*(client(c) for _ in range(concurrency)))
    return seen


def recovery_s(refusals: list[float], cleared_at: float) -> float:
    """Seconds from the fault's end to the last refusal (0 when none came after it)."""
    return round(max([t - cleared_at for t in refusals] + [0.0]), 2)


def refused(statuses: Counter[str]) -> int:
    return sum(n for s, n in statuses.items() if s != "200" and not s.startswith("transport"))
