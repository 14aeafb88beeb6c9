"""How every admin route is wrapped: the admin token checked, path ids checked, and every
failure turned into an OpenAI-format error (never a plain-text 500)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from sqlalchemy.exc import (
    DataError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    StatementError,
)
from starlette.requests import Request
from starlette.responses import Response

from fairgate.backends.openai_wire import WireError, error_response
from fairgate.backends.openai_wire.headers import bearer
from fairgate.gateway.admin.state import admin_state
from fairgate.gateway.admin.token import admin_enabled, admin_token_ok
from fairgate.gateway.request.auth_throttle import client_address
from fairgate.gateway.store.secret_box import MISSING, SecretsKeyMissing

Handler = Callable[[Request], Awaitable[Any]]
log = logging.getLogger("fairgate.admin")
MAX_PATH_ID = 200  # the widest id column (names); anything longer cannot match a row


def _check_auth(request: Request) -> None:
    """The admin token (FAIRGATE_ADMIN_TOKEN or the one made on first start), or 401; an address
    over its failed tries is refused (429) even with the right token while its window lasts, so
    the token cannot be guessed at speed."""
    state = admin_state(request.app)
    if not admin_enabled(state):
        raise WireError(403, "The admin API is disabled: set FAIRGATE_ADMIN_TOKEN.", "admin_disabled")
    address = client_address(request.scope)
    state.auth_throttle.check(address)
    if not admin_token_ok(state, bearer(request.headers.get("authorization")) or ""):
        state.auth_throttle.failed(address)
        raise WireError(401, "This route needs the admin token.", "invalid_admin_token")


def _check_path(request: Request) -> None:
    """Ids in the path are client text too: a NUL (`%00`) or an overlong one is a 400."""
    for name, value in request.path_params.items():
        if not isinstance(value, str):
            continue
        if "\x00" in value or len(value) > MAX_PATH_ID:
            raise WireError(400, f"`{name}` in the path must be at most {MAX_PATH_ID} characters, without NUL.",
                           "invalid_value", name)


def admin_route(fn: Handler) -> Callable[[Request], Awaitable[Response]]:
    """Check the admin token and the path, run the handler, turn WireError / database errors
    into OpenAI-format responses (never a plain-text 500)."""

    @functools.wraps(fn)
    async def wrapper(request: Request) -> Response:
        try:
            _check_auth(request)
            _check_path(request)
            out = await fn(request)
        except WireError as err:
            return error_response(err)
        except IntegrityError:
            return error_response(WireError(409, "That conflicts with an existing record (duplicate name?).",
                                           "conflict"))
        except DataError:  # a value the schema let through but a column cannot hold
            return error_response(WireError(400, "A value does not fit its field.", "invalid_value"))
        except (OperationalError, InterfaceError) as exc:  # the database is unreachable
            log.warning("admin %s %s: database unavailable (%s)", request.method, request.url.path,
                        type(exc).__name__)
            return error_response(WireError(503, "The database is unavailable; retry shortly.",
                                           "database_unavailable", headers={"retry-after": "1"}))
        except StatementError as exc:
            if isinstance(exc.orig, SecretsKeyMissing):  # cannot store an upstream key without the key
                return error_response(WireError(400, "This gateway cannot store `api_key` (nor a backend's `proxy_url` "
                                               f"or `extra_headers`): {MISSING}.",
                                               "secrets_key_missing", "api_key"))
            log.exception("admin %s %s failed (%s)", request.method, request.url.path, type(exc).__name__)
            return error_response(WireError(500, "The admin request failed; see the gateway log.", "internal_error"))
        except Exception as exc:
            log.exception("admin %s %s failed (%s)", request.method, request.url.path, type(exc).__name__)
            return error_response(WireError(500, "The admin request failed; see the gateway log.", "internal_error"))
        if isinstance(out, Response):
            return out
        status, obj = out if isinstance(out, tuple) else (200, out)
        return Response(orjson.dumps(obj), status, media_type="application/json")

    return wrapper
