"""Who may scrape `GET /metrics`, on the gateway and the engine server alike.

A scrape needs `Authorization: Bearer <token>` with one of the accepted tokens (a metrics
token, and the admin token on the gateway or the engine's API key on an engine server), unless
anonymous scrapes are allowed. With no token configured and anonymous scrapes off, /metrics is
disabled (403 saying what to set). Refusals are OpenAI error bodies, like every other route.

Tenant ids are not metric labels unless `tenant_labels`: a scrape would otherwise list every
tenant. Without it the `tenant` label is empty, which Prometheus stores as no label at all.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.responses import Response

from fairgate.backends.openai_wire import WireError, error_response
from fairgate.backends.openai_wire.headers import bearer

TRUE = ("1", "true", "yes", "on")


@dataclass(slots=True, frozen=True)
class MetricsAccess:
    token: str | None = field(default=None, repr=False)
    anonymous: bool = False
    tenant_labels: bool = False

    @classmethod
    def from_env(cls) -> MetricsAccess:
        """FAIRGATE_METRICS_TOKEN, FAIRGATE_METRICS_ANONYMOUS, FAIRGATE_METRICS_TENANT_LABELS."""
        return cls(os.environ.get("FAIRGATE_METRICS_TOKEN") or None,
                   os.environ.get("FAIRGATE_METRICS_ANONYMOUS", "").lower() in TRUE,
                   os.environ.get("FAIRGATE_METRICS_TENANT_LABELS", "").lower() in TRUE)

    def tenant(self, tenant: str) -> str:
        """The tenant label value: the id when tenant labels are on, else empty."""
        return tenant if self.tenant_labels else ""

    def refusal(self, authorization: str | None, also: Iterable[str | None] = ()) -> WireError | None:
        """Why this scrape is refused (None: allowed). `also`: further tokens that may scrape."""
        if self.anonymous:
            return None
        accepted = [t for t in (self.token, *also) if t]
        if not accepted:
            return WireError(403, "Metrics are disabled: set FAIRGATE_METRICS_TOKEN (or allow anonymous "
                                  "scrapes with FAIRGATE_METRICS_ANONYMOUS=true).", "metrics_disabled")
        given = (bearer(authorization) or "").encode()
        if not any(hmac.compare_digest(given, t.encode()) for t in accepted):
            return WireError(401, "Metrics need `Authorization: Bearer <metrics token>`.", "invalid_metrics_token")
        return None


def metrics_response(registry: CollectorRegistry, access: MetricsAccess, authorization: str | None,
                     also: Iterable[str | None] = ()) -> Response:
    """The text exposition of `registry`, or the OpenAI-format refusal."""
    refused = access.refusal(authorization, also)
    if refused is not None:
        return error_response(refused)
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
