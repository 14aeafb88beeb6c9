"""Why a request got no answer, in the classes an operator acts on: the metric
`fairgate_refusals_total{route, reason}` and the refusal log lines share them, and the latency
histograms leave refusals out (an instant 400 is not a fast answer)."""

from __future__ import annotations

QUOTA_UNAVAILABLE = frozenset({"quota_unavailable", "usage_unavailable", "service_unavailable", "config_changing"})


def refusal_reason(status: int, code: str | None) -> str:
    """Why a request got no answer, in the few classes an operator acts on: auth, quota,
    validation, context_length, no_backend, sensitive_without_local, unavailable (the gateway's
    own stores) or upstream_error (the backends failed)."""
    if status in (401, 403):
        return "auth"
    if status == 429:
        return "quota"
    if code in ("context_length_exceeded", "request_too_large"):
        return "context_length"
    if code in ("local_backend_unavailable", "no_local_backend"):
        return "sensitive_without_local"
    if status == 404 or code in ("no_backend", "model_not_found", "no_healthy_replica"):
        return "no_backend"
    if code in QUOTA_UNAVAILABLE:
        return "unavailable"
    return "validation" if status < 500 else "upstream_error"
