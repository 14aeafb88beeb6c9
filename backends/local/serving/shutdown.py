"""uvicorn for `fairgate engine`, ending its open requests itself when it stops.

On SIGTERM uvicorn stops accepting, waits `timeout_graceful_shutdown` for open requests, then
cancels their tasks: a stream still generating would be cut mid-event. This server closes the
engine one second before that cancellation instead, so every unfinished request ends as the
engine ends it (finish_reason "abort", "engine shut down") and its client gets the in-band
failure: the OpenAI error event on chat/completions, `response.failed` on /v1/responses.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket

import uvicorn

from fairgate.backends.local.serving.backend import LocalBackend


class EngineUvicorn(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, backend: LocalBackend) -> None:
        super().__init__(config)
        self.backend = backend

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        grace = max(float(self.config.timeout_graceful_shutdown or 0) - 1.0, 0.0)
        ender = asyncio.get_running_loop().create_task(self._end_engine_after(grace))
        try:
            await super().shutdown(sockets)
        finally:
            ender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ender

    async def _end_engine_after(self, grace_s: float) -> None:
        await asyncio.sleep(grace_s)
        await self.backend.aclose()  # unfinished streams end with "abort"; idempotent at lifespan end
