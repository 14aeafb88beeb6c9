"""Reading request bodies and writing OpenAI errors, for raw ASGI endpoints and Starlette routes."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

from fairgate.backends.openai_wire.errors import WireError
from fairgate.backends.types import Receive, Send

JSON_HEADERS = [(b"content-type", b"application/json")]
MAX_JSON_DEPTH = 64  # nesting levels of a body; JSON schemas in real requests stay far below


async def read_body(receive: Receive, headers: dict[bytes, bytes], limit: int,
                    too_large_code: str = "request_too_large") -> bytes:
    """The whole body, refused with a 413 as soon as it is known to pass `limit` bytes."""
    length = headers.get(b"content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise _too_large(limit, too_large_code)
    parts: list[bytes] = []
    size = 0
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            raise WireError(400, "client disconnected", "client_disconnected")
        part = msg.get("body", b"")
        size += len(part)
        if size > limit:
            raise _too_large(limit, too_large_code)
        parts.append(part)
        if not msg.get("more_body"):
            return b"".join(parts)


def _too_large(limit: int, code: str) -> WireError:
    return WireError(413, f"The request body is larger than the limit of {limit} bytes.", code)


def parse_json_object(raw: bytes) -> dict[str, Any]:
    """A UTF-8 JSON object, or a 400 saying which of the three it is not."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:  # orjson checks UTF-8 too; tell the client which problem it has
            raw.decode("utf-8")
        except UnicodeDecodeError:
            raise WireError(400, "The request body is not valid UTF-8.", "invalid_encoding") from None
        raise WireError(400, "We could not parse the JSON body of your request.", "invalid_json") from None
    if not isinstance(body, dict):
        raise WireError(400, "The request body must be a JSON object.", "invalid_json")
    # Bodies are re-serialised (orjson stops at 255 levels) and walked recursively downstream;
    # counting brackets in C first keeps the walk off the usual body.
    if raw.count(b"{") + raw.count(b"[") > MAX_JSON_DEPTH:
        deep = _too_deep(body, MAX_JSON_DEPTH)
        if deep is not None:
            raise WireError(400, f"`{deep}` is nested more than {MAX_JSON_DEPTH} levels deep.", "invalid_value", deep)
    return body


def _too_deep(body: dict[str, Any], limit: int) -> str | None:
    """The first top-level field whose value nests past `limit` levels (the body is level 1)."""
    for key, value in body.items():
        stack = [(value, 2)]
        while stack:
            v, depth = stack.pop()
            if depth > limit:
                return key
            items = v.values() if isinstance(v, dict) else v if isinstance(v, list) else ()
            stack.extend((x, depth + 1) for x in items if isinstance(x, dict | list))
    return None


async def read_json_object(receive: Receive, headers: dict[bytes, bytes], limit: int,
                           too_large_code: str = "request_too_large") -> dict[str, Any]:
    """`read_body` then `parse_json_object`: the one body reader of both front doors."""
    return parse_json_object(await read_body(receive, headers, limit, too_large_code))


async def send_json(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    """A complete JSON response in two ASGI messages."""
    await send({"type": "http.response.start", "status": status,
                "headers": [*JSON_HEADERS, (b"content-length", b"%d" % len(body)), *headers]})
    await send({"type": "http.response.body", "body": body})


async def send_error(send: Send, err: WireError) -> None:
    """The error as a raw ASGI response."""
    await send_json(send, err.status, err.body_bytes(),
                    [(k.lower().encode(), v.encode()) for k, v in err.headers.items()])


def error_response(err: WireError) -> Response:
    """The error as a Starlette response."""
    return Response(err.body_bytes(), err.status, headers=err.headers, media_type="application/json")
