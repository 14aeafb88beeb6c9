"""vLLM as an engine behind the gateway: an OpenAI-compatible server that we feed each
tenant's priority class and cache salt.

vLLM has per-request `priority` (lower runs first, with `--scheduling-policy priority`) and
`cache_salt` (its prefix cache keeps different salts apart), but no tenant fairness: the
gateway brings that (admission, quotas, fair shares across the pool). Tenant ids never go to
vLLM, only the salt (an opaque string the gateway chose). A vLLM started without
`--scheduling-policy priority` refuses a non-zero priority: set `send_priority=False` for it.
"""

from __future__ import annotations

from typing import Any

import orjson

from fairgate.backends.base import GenerationRequest
from fairgate.backends.openai_compat import OpenAICompatBackend

# our classes → vLLM priorities (lower value is scheduled earlier; standard stays vLLM's default)
VLLM_PRIORITY = {"interactive": -10, "standard": 0, "batch": 10}


def vllm_fields(request: GenerationRequest, send_priority: bool = True) -> dict[str, Any]:
    """The vLLM-specific body fields for one request."""
    out: dict[str, Any] = {}
    if send_priority:
        out["priority"] = VLLM_PRIORITY.get(request.priority, 0)
    if request.cache_salt:
        out["cache_salt"] = request.cache_salt
    return out


class VLLMBackend(OpenAICompatBackend):
    """`OpenAICompatBackend` that adds `priority` and `cache_salt` to every body and sends no
    tenant headers (vLLM ignores them; they would only leak tenant ids)."""

    keeps_request_ledger = False

    def __init__(self, *args: Any, send_priority: bool = True, **kwargs: Any) -> None:
        kwargs.setdefault("is_local", True)
        super().__init__(*args, **kwargs)
        self.send_priority = send_priority

    def _prepare(self, request: GenerationRequest, stream: bool) -> tuple[str, bytes]:
        path, payload = super()._prepare(request, stream)
        body = orjson.loads(payload)
        body.update(vllm_fields(request, self.send_priority))
        return path, orjson.dumps(body)

    def _request_headers(self, request: GenerationRequest) -> bytes:
        return self._headers
