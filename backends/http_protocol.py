"""uvicorn's httptools protocol with request-header limits enforced while parsing.

httptools holds a header value until it is complete, and uvicorn sets no limit, so a 50 MB
header would sit in memory before any ASGI middleware could look at it. This protocol counts
the bytes of the request head as they arrive and answers 431 (an OpenAI error body, then close)
once the head passes the total limit, or a header passes its own or the count limit, whichever
comes first. `HeaderGuard` (backends/openai_wire/headers.py) checks the same limits in ASGI,
for servers run without this protocol.

    config = uvicorn.Config(app, http=limited_protocol(HeaderLimits()), ...)
"""

from __future__ import annotations

from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from fairgate.backends.openai_wire.errors import WireError
from fairgate.backends.openai_wire.headers import HeaderLimits, too_large

HEAD_SLACK = 8192  # the request line and the CRLFs around the headers


class _Refused(Exception):
    def __init__(self, error: WireError) -> None:
        super().__init__(error.message)
        self.error = error


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    limits = HeaderLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True
        self._head_bytes = 0
        self._head_count = 0

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head, self._head_bytes, self._head_count = True, 0, 0

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_count += 1
        size = len(name) + len(value)
        if size > self.limits.max_header_bytes:
            raise _Refused(too_large(f"`{name[:64].decode('latin-1')}` is {size} bytes, over the limit "
                                     f"of {self.limits.max_header_bytes}"))
        if self._head_count > self.limits.max_count:
            raise _Refused(too_large(f"more than {self.limits.max_count} headers"))
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

    def data_received(self, data: bytes) -> None:
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            if isinstance(exc.__context__, _Refused):
                self._refuse(exc.__context__.error)
                return
            self._bad_request()
            return
        except httptools.HttpParserError:
            self._bad_request()
            return
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        if self._in_head:  # still inside a head: what httptools holds grows with every byte
            self._head_bytes += len(data)
            if self._head_bytes > self.limits.max_total_bytes + HEAD_SLACK:
                self._refuse(too_large(f"a request head over {self.limits.max_total_bytes} bytes"))

    def _bad_request(self) -> None:
        msg = "Invalid HTTP request received."
        self.logger.warning(msg)
        self.send_400_response(msg)

    def _refuse(self, error: WireError) -> None:
        body = error.body_bytes()
        self.transport.write(b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
                             b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body))
        self.transport.close()
        self._in_head = False


def limited_protocol(limits: HeaderLimits) -> type[LimitedHttpToolsProtocol]:
    """A protocol class for `uvicorn.Config(http=...)` enforcing `limits`."""
    return type("LimitedHttpToolsProtocol", (LimitedHttpToolsProtocol,), {"limits": limits})
