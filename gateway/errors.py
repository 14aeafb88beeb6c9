"""OpenAI-style error bodies: {"error": {"message", "type", "code", "param"}}."""

from __future__ import annotations

import orjson
from starlette.responses import Response

TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
         404: "invalid_request_error", 405: "invalid_request_error", 409: "invalid_request_error",
         413: "invalid_request_error", 415: "invalid_request_error", 422: "invalid_request_error",
         429: "rate_limit_error"}


class ApiError(Exception):
    """Raised anywhere in a handler; turned into the error response by `error_response`."""

    def __init__(self, status: int, message: str, code: str | None = None, param: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.headers = headers or {}


def error_body(status: int, message: str, code: str | None = None, param: str | None = None) -> bytes:
    etype = TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return orjson.dumps({"error": {"message": message, "type": etype, "code": code, "param": param}})


def error_response(err: ApiError) -> Response:
    return Response(error_body(err.status, err.message, err.code, err.param), err.status,
                    headers=err.headers, media_type="application/json")


async def send_error(send, err: ApiError) -> None:  # type: ignore[no-untyped-def]
    """The same error for raw ASGI endpoints."""
    body = error_body(err.status, err.message, err.code, err.param)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in err.headers.items()]
    await send({"type": "http.response.start", "status": err.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
