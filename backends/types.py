"""ASGI types for raw endpoints (gateway hot path, engine server), after starlette/types.py.

The bottom of the import graph: this module imports nothing of ours and nothing at run time
beyond `typing`, so any layer may use it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
RawHeaders = list[tuple[bytes, bytes]]
