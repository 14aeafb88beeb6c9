"""The one OpenAI error type and body: {"error": {"message", "type", "code", "param"}}."""

from __future__ import annotations

from typing import Any

import orjson

from fairgate.backends.base import BackendError

_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          429: "rate_limit_error"}


def error_type(status: int) -> str:
    """OpenAI's `type` for an HTTP status: 5xx are server errors, other 4xx invalid requests."""
    return _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")


def error_body(status: int, message: str, code: str | None = None, param: str | None = None,
               type: str | None = None) -> dict[str, Any]:
    """The OpenAI error object for a status (`type` derived from it unless given)."""
    return {"error": {"message": message, "type": type or error_type(status), "code": code, "param": param}}


class WireError(BackendError):
    """A request refused (or failed) with an OpenAI error body and an HTTP status.

    Raised by the parser, the gateway's admission steps and the local engine alike. A 4xx is
    never retryable (the same body fails the same way on every backend); a 5xx is, unless
    `retryable` says otherwise. `headers` go out with the response (e.g. retry-after).
    """

    def __init__(self, status: int, message: str, code: str | None = None, param: str | None = None,
                 type: str | None = None, headers: dict[str, str] | None = None,
                 retryable: bool | None = None) -> None:
        super().__init__(message, status=status, retryable=status >= 500 if retryable is None else retryable,
                         code=code, param=param, headers=headers)
        self.message = message
        self.type = type or error_type(status)
        self.tenant: str | None = None  # who was refused, where the gateway knew it (its log line)

    def body(self) -> dict[str, Any]:
        return error_body(self.status, self.message, self.code, self.param, self.type)

    def body_bytes(self) -> bytes:
        return orjson.dumps(self.body())


def bad_value(message: str, param: str | None = None) -> WireError:
    """A 400 for a field with a wrong type or value."""
    return WireError(400, message, "invalid_value" if param else "invalid_request", param)
