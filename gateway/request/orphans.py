"""Bill the requests a killed process left out (gateway/billing/open_requests.py).

Runs once at start, in the background. It first waits until the database is reachable and the
usage journal is replayed (a journaled row is the real one and must win), then gives each
leftover request without a row the row settlement would have written: status `failed`, 502
(its client saw the connection drop), the exact counts where the backend still knows them
(our engine servers' request ledger, streams included), else the prompt bound and no
completion, marked estimated. The reservation is settled with those counts if it still lives;
once its TTL has passed it stays charged as reserved (never less than what was used).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

from fairgate.gateway.billing.usage import UsageEvent
from fairgate.gateway.request.settlement import ROUTES
from fairgate.gateway.request.state import RequestState

log = logging.getLogger("fairgate.request")


async def bill_orphans(state: RequestState, poll_s: float = 0.5) -> int:
    """The number of leftover requests billed now."""
    usage = state.usage
    rows = usage.open.left
    if not rows:
        return 0
    while not (usage.db_up and usage.journal.rows == 0):
        await asyncio.sleep(poll_s)
    missing = await asyncio.to_thread(usage.without_rows, [r["request_id"] for r in rows])
    billed = 0
    for row in rows:
        if row["request_id"] in missing:
            missing.discard(row["request_id"])  # a request written twice to the file is billed once
            usage.record(await _event(state, row))
            billed += 1
    if billed:
        log.warning("billed %d requests the previous process left out when it stopped", billed)
    if await usage.flush():
        usage.open.recovered()
    return billed


async def _event(state: RequestState, row: dict[str, Any]) -> UsageEvent:
    backend_name = row.get("backend")
    backend = state.backends.get(backend_name) if isinstance(backend_name, str) else None
    exact = None
    if backend is not None and isinstance(row.get("engine_request_id"), str):
        try:
            exact = await backend.usage_of(row["engine_request_id"])
        except Exception as exc:  # noqa: BLE001 - an unreachable engine leaves the estimate
            log.warning("could not ask %s what a cut request used (%s)", backend_name, type(exc).__name__)
    if exact is not None:
        prompt, completion = int(exact.get("prompt_tokens") or 0), int(exact.get("completion_tokens") or 0)
    else:
        prompt, completion = int(row.get("prompt_tokens") or 0), 0
    price = state.prices.get(backend_name) if isinstance(backend_name, str) else None
    cost = price.cost(prompt, completion) if price else 0.0
    rid = row["request_id"]
    try:
        await state.quota.settle(rid, prompt + completion, cost)
    except Exception as exc:  # noqa: BLE001 - the row matters more; the TTL released the slot
        log.warning("settle failed for a cut request (%s)", type(exc).__name__)
    return UsageEvent(
        request_id=rid, tenant_id=str(row.get("tenant_id") or ""), key_prefix=str(row.get("key_prefix") or ""),
        model=str(row.get("model") or ""), backend=backend_name if isinstance(backend_name, str) else None,
        priority=str(row.get("priority") or ""), status="failed", stream=bool(row.get("stream")),
        prompt_tokens=prompt, completion_tokens=completion, usage_estimated=exact is None, cost=cost,
        http_status=502, ttft_ms=None, latency_ms=0.0, route=ROUTES.get(str(row.get("kind")), ""),
        created_at=datetime.fromtimestamp(float(row.get("t") or 0), UTC).replace(tzinfo=None))
