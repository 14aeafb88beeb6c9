"""Push tenant fairness weights into every local engine the gateway can reach.

Called at startup and after every admin change to a tenant. In-process engines get a direct
`set_fairness`; engine servers (PUT /control/fairness) are the fairness issue's part.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import select

from gateway.models import Tenant


async def push_weights(app_state: Any) -> dict[str, float]:
    """Read every enabled tenant's weight (keyed by tenant id, the engine's tenant name) and
    hand the map to each engine; returns the map."""

    def load() -> dict[str, float]:
        with app_state.sessions() as s:
            rows = s.execute(select(Tenant.id, Tenant.weight).where(Tenant.disabled.is_(False)))
            return {tid: float(w) for tid, w in rows}

    weights = await asyncio.to_thread(load)
    app_state.fairness_version = getattr(app_state, "fairness_version", 0) + 1
    for backend in app_state.backends.values():
        engine = getattr(backend, "engine", None)
        if engine is not None and hasattr(engine, "set_fairness"):
            engine.set_fairness(weights, app_state.fairness_version)
    return weights
