"""`POST /v1/embeddings`: the request read and checked, and the response built.

`input` is a string, a list of strings, a list of token ids, or a list of token-id lists (as
OpenAI takes it); `encoding_format` "float" (default) or "base64" (little-endian float32, what
the openai SDK asks for and decodes); `dimensions` is refused unless it equals the model's own
size (no model here is trained for shortened embeddings). The reading is a `WireRequest` of kind
"embedding", so the gateway's admission (auth, quotas, KVKK classification of the texts,
routing, reservation, usage) runs on it like on any other request.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Sequence
from typing import Any

from fairgate.backends.openai_wire.errors import WireError, bad_value
from fairgate.backends.openai_wire.limits import WireLimits
from fairgate.backends.openai_wire.request import LIMITS, TEMPLATE_TOKENS_BASE, WireRequest, is_int

_FIELDS = frozenset({"model", "input", "encoding_format", "dimensions", "user"})


def parse_embeddings(body: Any, *, require_model: bool = True, limits: WireLimits = LIMITS) -> WireRequest:
    """Validate an embeddings body; raise `WireError` (400) naming the bad field."""
    if not isinstance(body, dict):
        raise WireError(400, "The request body must be a JSON object.", "invalid_json")
    model = body.get("model")
    if (model is not None or require_model) and (not isinstance(model, str) or not model):
        raise bad_value("`model` is required and must be a string", "model")
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        raise bad_value(f"Unknown parameter: `{unknown[0]}`", unknown[0])
    inputs = _inputs(body.get("input"), limits.max_embedding_inputs)
    if body.get("encoding_format", "float") not in ("float", "base64"):
        raise bad_value('`encoding_format` must be "float" or "base64"', "encoding_format")
    dims = body.get("dimensions")
    if dims is not None and (not is_int(dims) or dims < 1):
        raise bad_value("`dimensions` must be a positive integer", "dimensions")
    if body.get("user") is not None and not isinstance(body["user"], str):
        raise bad_value("`user` must be a string", "user")
    texts = [p for p in inputs if isinstance(p, str)]
    bound = TEMPLATE_TOKENS_BASE * len(inputs) + sum(len(t.encode()) for t in texts) + sum(
        len(p) for p in inputs if not isinstance(p, str))
    return WireRequest("embedding", model, False, False, False, None, "max_tokens", texts, bound,
                       prompt=inputs[0], prompts=inputs, body=body)


def _inputs(value: Any, most: int) -> list[str | list[int]]:
    if isinstance(value, str) or (isinstance(value, list) and value and all(is_int(t) for t in value)):
        value = [value]
    if not isinstance(value, list) or not value:
        raise bad_value("`input` must be a non-empty string, list of strings, list of token ids, "
                        "or list of token-id lists", "input")
    if len(value) > most:
        raise bad_value(f"`input` may hold at most {most} items", "input")
    for i, item in enumerate(value):
        ok = (isinstance(item, str) and item) or (
            isinstance(item, list) and item and all(is_int(t) and t >= 0 for t in item))
        if not ok:
            raise bad_value(f"input[{i}] must be a non-empty string or a non-empty list of token ids", "input")
    return value


def check_dimensions(body: dict[str, Any], native: int) -> None:
    """`dimensions` other than the model's own size cannot be honoured."""
    dims = body.get("dimensions")
    if dims is not None and dims != native:
        raise bad_value(f"`dimensions` {dims} is not supported: this model's embeddings have {native} "
                        "dimensions and cannot be shortened", "dimensions")


def encode_vector(vector: Sequence[float], encoding_format: str) -> list[float] | str:
    if encoding_format == "base64":
        return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
    return list(vector)


def embeddings_response(model: str, vectors: Sequence[Sequence[float]], prompt_tokens: int,
                        encoding_format: str = "float") -> dict[str, Any]:
    """OpenAI's list of embedding objects, in input order, with usage."""
    return {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": encode_vector(v, encoding_format)}
                 for i, v in enumerate(vectors)],
        "model": model,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
    }
