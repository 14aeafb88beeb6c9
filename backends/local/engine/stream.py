"""The consumer side of one request's output: a channel filled by the engine thread and the
async iterator a caller reads.

Only the event loop that added the request touches a channel's pending delta (the engine thread
reaches it through `loop.call_soon_threadsafe`), so no lock is needed. A consumer that falls
behind gets the pending deltas merged into one, so the engine never waits for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType

from fairgate.backends.local.engine.output import RequestOutput


class StreamChannel:
    """Where the engine thread drops a request's deltas; read by one `RequestStream`."""

    __slots__ = ("request_id", "loop", "pending", "event", "finished", "closed", "after_leaving")

    def __init__(self, request_id: str, loop: asyncio.AbstractEventLoop) -> None:
        self.request_id = request_id
        self.loop = loop
        self.pending: RequestOutput | None = None
        self.event = asyncio.Event()
        self.finished = False  # the engine sent the last delta
        self.closed = False  # the consumer left
        # who takes the last delta of a request whose consumer left (its usage: the engine's count)
        self.after_leaving: Callable[[RequestOutput], None] | None = None

    def put(self, out: RequestOutput) -> None:
        if self.closed:
            if out.finished and self.after_leaving is not None:
                self.after_leaving(out)  # the abort's delta: what was generated, delivered or not
            return
        if self.pending is None:
            self.pending = out
        else:
            self.pending.merge(out)
        self.event.set()

    def close(self) -> None:
        self.closed = True
        left, self.pending = self.pending, None
        if left is not None and left.finished and self.after_leaving is not None:
            self.after_leaving(left)  # it ended before the consumer left: no abort will answer

    @staticmethod
    def deliver_many(items: list[tuple[StreamChannel, RequestOutput]]) -> None:
        for channel, out in items:
            channel.put(out)

    @staticmethod
    def send_all(deliveries: list[tuple[StreamChannel, RequestOutput]]) -> None:
        """From the engine thread: hand deltas to their loops, one thread hop per loop per step."""
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[StreamChannel, RequestOutput]]] = {}
        for channel, out in deliveries:
            by_loop.setdefault(channel.loop, []).append((channel, out))
        for loop, items in by_loop.items():
            try:
                loop.call_soon_threadsafe(StreamChannel.deliver_many, items)
            except RuntimeError:  # the consumer's loop is gone; nothing to tell it
                pass


class RequestStream:
    """Async iterator of a request's `RequestOutput` deltas; the last one is finished.

    Leaving early aborts the request: `aclose()`, `async with` exit, cancellation of the task
    waiting on it, or dropping the last reference. Blocks are freed at the next step boundary.
    """

    def __init__(self, channel: StreamChannel, abort: Callable[[str], None]) -> None:
        self._channel = channel
        self._abort = abort
        self._done = False

    @property
    def request_id(self) -> str:
        return self._channel.request_id

    def count_after_leaving(self, take: Callable[[RequestOutput], None]) -> None:
        """If the consumer leaves early, the request's last delta still goes to `take` (on this
        loop, at the step that aborts it): its usage is the engine's own count of the tokens it
        generated, those that never reached the consumer included, so a cut request is billed
        by what ran."""
        self._channel.after_leaving = take

    def __aiter__(self) -> RequestStream:
        return self

    async def __anext__(self) -> RequestOutput:
        if self._done:
            raise StopAsyncIteration
        channel = self._channel
        try:
            while channel.pending is None:
                channel.event.clear()
                await channel.event.wait()
        except BaseException:  # cancelled: the consumer is gone
            self._leave()
            raise
        out, channel.pending = channel.pending, None
        if out.finished:
            self._done = True
            channel.finished = True
        return out

    async def aclose(self) -> None:
        self._leave()

    async def __aenter__(self) -> RequestStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._leave()

    def _leave(self) -> None:
        if not self._done:
            self._done = True
            self._channel.close()
            self._abort(self._channel.request_id)

    def __del__(self) -> None:
        # Last resort for a consumer that neither finished nor closed the stream.
        if not self._done:
            self._done = True
            self._channel.closed = True
            self._abort(self._channel.request_id)
