"""The one OpenAI wire layer, shared by the gateway's front door and the engine server's.

- `errors`: `WireError(status, message, code, param, type, headers)` and `error_body`;
- `request`: `parse_request` → `WireRequest` (validated fields, prompt-token bound);
- `context`: the context-length rule and its messages;
- `responses`: response, chunk, usage and SSE builders;
- `asgi`: the body reader (413, UTF-8, JSON object) and error responses.
"""

from __future__ import annotations

from fairgate.backends.openai_wire.asgi import (
    error_response,
    parse_json_object,
    read_body,
    read_json_object,
    send_error,
    send_json,
)
from fairgate.backends.openai_wire.context import (
    check_completion_fits,
    check_prompt_fits,
    completion_limit,
    completion_room,
    prompt_too_long,
)
from fairgate.backends.openai_wire.errors import WireError, bad_value, error_body, error_type
from fairgate.backends.openai_wire.limits import WireLimits, parse_limit_overrides
from fairgate.backends.openai_wire.request import (
    TEMPLATE_TOKENS_BASE,
    TEMPLATE_TOKENS_PER_MESSAGE,
    WireRequest,
    parse_request,
)
from fairgate.backends.openai_wire.responses import (
    SSE_DONE,
    chunk,
    chunk_has_content,
    chunk_text_count,
    full_response,
    response_id,
    sse,
    sse_stream_error,
    usage_chunk,
    usage_dict,
)

__all__ = [
    "WireLimits", "parse_limit_overrides",
    "SSE_DONE", "TEMPLATE_TOKENS_BASE", "TEMPLATE_TOKENS_PER_MESSAGE", "WireError", "WireRequest",
    "bad_value", "check_completion_fits", "check_prompt_fits", "chunk", "chunk_has_content", "chunk_text_count",
    "completion_limit", "completion_room", "error_body", "error_response", "error_type", "full_response",
    "parse_json_object", "parse_request", "prompt_too_long", "read_body", "read_json_object",
    "response_id", "send_error", "send_json", "sse", "sse_stream_error", "usage_chunk", "usage_dict",
]
