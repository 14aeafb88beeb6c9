"""The gateway's Starlette app, with the OpenAI POST endpoints reached without its layers.

Every request to /v1/chat/completions (and the other raw-ASGI POST endpoints) otherwise passes
Starlette's error middleware, `HeaderGuard`, the exception middleware and the router's scan
of every route: ~4 µs of CPU a request, where the endpoint needs none of them (it answers its
own errors, raises no HTTPException and reads no path parameters). `GatewayApp` sends those
requests straight to their endpoint after the same header checks `HeaderGuard` makes; every
other request, and any app mounted under a root path, takes the ordinary way.
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.routing import BaseRoute, Route

from fairgate.backends.openai_wire import send_error
from fairgate.backends.openai_wire.headers import HeaderLimits, check_headers
from fairgate.backends.types import ASGIApp, Receive, Scope, Send


def direct_endpoints(routes: list[BaseRoute]) -> dict[str, ASGIApp]:
    """Path → endpoint for the routes that take only POST, have no path parameters and whose
    endpoint is a raw ASGI callable (no Request/Response wrapping)."""
    out: dict[str, ASGIApp] = {}
    for r in routes:
        if isinstance(r, Route) and r.methods == {"POST"} and "{" not in r.path and r.app is r.endpoint:
            out.setdefault(r.path, r.app)  # the first route for a path is the one the router would pick
    return out


class GatewayApp(Starlette):
    def __init__(self, *, limits: HeaderLimits, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._limits = limits
        self._direct = direct_endpoints(self.router.routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            endpoint = self._direct.get(scope["path"])
            if endpoint is not None:
                scope["app"] = self
                refusal = check_headers(scope["headers"], self._limits)
                if refusal is not None:
                    await send_error(send, refusal)
                    return
                await endpoint(scope, receive, send)
                return
        await super().__call__(scope, receive, send)
