"""The one fallback loop: try the routed backends in order until one answers.

Used for both kinds of answer: a whole response (`complete`) and the opening of a stream (up
to its first batch; once bytes went out there is no fallback). Personal data never goes to a
non-local backend, checked here once more right before the call.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from fairgate.backends.base import Backend, BackendError, UsageSoFar
from fairgate.backends.openai_wire import WireError
from fairgate.gateway.request.admission import Admitted
from fairgate.gateway.request.routing import RETRY_SOON, sensitive_unavailable

T = TypeVar("T")


def allowed_backends(adm: Admitted) -> list[Backend]:
    # defence in depth: the router already filtered, but personal data never leaves local hardware
    return [b for b in adm.decision.backends if b.is_local or not adm.decision.sensitive]


async def first_answer(adm: Admitted, call: Callable[[Backend], Awaitable[T]]) -> tuple[Backend, T]:
    """The first backend whose `call` succeeds and what it returned; a retryable failure moves
    on to the next. Raises the client's `WireError` when none answered. Time spent waiting
    counts into `adm.backend_s` (it is not gateway overhead)."""
    err: BackendError | None = None
    for backend in allowed_backends(adm):
        started = time.perf_counter()
        adm.trying, adm.gen.used = backend.name, UsageSoFar()  # a failed attempt's counts are not this one's
        try:
            return backend, await call(backend)
        except BackendError as exc:
            err = exc
            if not exc.retryable:
                break
        except Exception as exc:  # a backend bug must still end in one settle and one record
            err = BackendError(f"backend {backend.name} failed: {type(exc).__name__}", 502, True)
        finally:
            adm.backend_s += time.perf_counter() - started
    raise no_backend_error(adm, err)


def no_backend_error(adm: Admitted, err: BackendError | None) -> WireError:
    if adm.decision.sensitive and (err is None or err.retryable or err.status >= 500):  # local down/full: 503
        e = sensitive_unavailable(err)
        headers = err.headers if err is not None and "retry-after" in err.headers else RETRY_SOON
        return WireError(e.status, str(e), e.code, headers=headers)
    if err is None:
        return WireError(503, "No local backend can take this sensitive request.", "no_local_backend",
                         headers=RETRY_SOON)
    return WireError(err.status if 400 <= err.status < 600 else 502, str(err),
                     err.code or ("upstream_error" if err.status >= 500 else "invalid_request"), err.param,
                     headers=err.headers)  # a breaker's Retry-After reaches the client
