"""The engine server's control API: the fairness weights a gateway pushes (`PUT /control/fairness`,
a body of tenant -> positive weight and an optional version) behind a shared secret."""

from __future__ import annotations

import hmac
from typing import Any

from starlette.requests import Request

from fairgate.backends.openai_wire import WireError


def fairness_body(body: Any) -> tuple[dict[str, float], int | None]:
    weights = body.get("weights") if isinstance(body, dict) else None
    if not isinstance(weights, dict) or not all(
        isinstance(k, str) and isinstance(v, int | float) and not isinstance(v, bool) and v > 0
        for k, v in weights.items()
    ):
        raise WireError(400, "weights must be an object of tenant -> positive number", param="weights")
    version = body.get("version")
    if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
        raise WireError(400, "version must be an integer", param="version")
    return {k: float(v) for k, v in weights.items()}, version


def secret_ok(request: Request, secret: str) -> bool:
    given = request.headers.get("x-control-secret") or ""
    auth = request.headers.get("authorization") or ""
    if auth.lower().startswith("bearer "):
        given = given or auth[7:]
    return hmac.compare_digest(given.encode(), secret.encode())
