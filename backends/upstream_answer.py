"""What an upstream's answer says besides its body: when to retry (Retry-After), when the
first token of a whole answer came (our engine servers' `x-fairgate-ttft-ms`), and the error it
gave (message, OpenAI code and param)."""

from __future__ import annotations

import time

import orjson

from fairgate.backends.http1 import Response


def retry_after_s(value: bytes | None) -> float | None:
    """Retry-After in seconds (delta-seconds or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    text = value.decode("latin-1").strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        return max(0.0, parsedate_to_datetime(text).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def first_token_at(resp: Response, sent: float) -> float | None:
    """When the first token of a whole answer came, from our engine server's own timing
    (`x-fairgate-ttft-ms`, from its arrival) and when it was sent here."""
    try:
        ms = float(resp.headers.get(b"x-fairgate-ttft-ms", b""))
    except ValueError:
        return None
    return sent + ms / 1000 if 0 <= ms < 86_400_000 else None


def upstream_error(data: bytes, status: int) -> tuple[str, str | None, str | None]:
    """The upstream's error message (short; never echoes request headers), and its OpenAI
    `code` and `param` when it gave them as strings."""
    code = param = None
    try:
        err = orjson.loads(data).get("error")
        msg = err.get("message") if isinstance(err, dict) else str(err)
        if isinstance(err, dict):
            code = err["code"][:64] if isinstance(err.get("code"), str) else None
            param = err["param"][:200] if isinstance(err.get("param"), str) else None
    except Exception:
        msg = data.decode("utf-8", "replace")
    return (msg or f"HTTP {status}")[:300], code, param
