"""`GET /admin/advice?window=24h`: `fairgate advise` over the running gateway (its database and
its own metrics), as JSON — what `fairgate advise --gateway-url` and a dashboard panel read."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from starlette.requests import Request
from starlette.routing import Route

from fairgate.backends.openai_wire import WireError
from fairgate.gateway.admin.routes import admin_route
from fairgate.gateway.admin.state import admin_state
from fairgate.gateway.observability.advise import advice_json, advise_for, parse_window
from fairgate.gateway.observability.state import ObservabilityState
from fairgate.policies.advice import Advice


@admin_route
async def get_advice(request: Request) -> Any:
    text = request.query_params.get("window", "24h")
    try:
        window = parse_window(text)
    except ValueError as exc:
        raise WireError(400, str(exc), "invalid_value", "window") from None
    items = await asyncio.to_thread(advise_for, admin_state(request.app), window)
    return {"window": text, "object": "list", "data": advice_json(items)}


async def advice_panel(state: ObservabilityState, hours: int) -> list[Advice]:
    """The dashboard's advice panel (gateway/dashboard): the same advice over the page's window,
    as Advice values, which the panel puts into words (gateway/dashboard/advice_text.py)."""
    return await asyncio.to_thread(advise_for, state, timedelta(hours=hours))


def routes() -> list[Route]:
    return [Route("/admin/advice", get_advice, methods=["GET"])]
