"""Several choices from one request: `n > 1` and batched prompts, each choice an engine request.

Choice `k` of a request with P prompts and n choices each belongs to prompt `k // n` (OpenAI's
and vLLM's order). The first choice of each prompt starts at once; its siblings start when it
sends its first delta, i.e. when its prefill is done and the prompt's full KV blocks are in the
prefix cache: the siblings map those blocks by reference count instead of computing them again
(only the last, partial block is recomputed per choice). Sibling j samples with seed `seed + j`,
so a seeded request is reproducible and its choices still differ.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass

from fairgate.backends.base import UsageSoFar
from fairgate.backends.local.engine.output import RequestOutput, Usage
from fairgate.backends.local.engine.stream import RequestStream
from fairgate.backends.local.engine.types import SamplingParams


@dataclass(slots=True)
class Choice:
    """One choice of a request, run as its own engine request."""

    index: int  # in the response's `choices`
    prompt_index: int
    request_id: str  # the engine's id: the request's own id for a single choice
    prompt_token_ids: list[int]
    sampling: SamplingParams
    leads: bool = True  # the first choice of its prompt: it prefills, its siblings reuse the blocks


def choice_ids(request_id: str, num_prompts: int, n: int) -> list[tuple[str, bool]]:
    """(engine id, leads) of every choice, in response order: the request's own id for a single
    choice, `<id>-<index>` otherwise (metrics label each engine request by these)."""
    if num_prompts == 1 and n == 1:
        return [(request_id, True)]
    return [(f"{request_id}-{k}", k % n == 0) for k in range(num_prompts * n)]


def plan_choices(request_id: str, prompts: list[list[int]], n: int, sampling: SamplingParams) -> list[Choice]:
    """Every choice of a request, in response order."""
    choices = []
    for k, (rid, leads) in enumerate(choice_ids(request_id, len(prompts), n)):
        j = k % n
        seed = None if sampling.seed is None else sampling.seed + j
        params = dataclasses.replace(sampling, seed=seed) if j else sampling
        choices.append(Choice(k, k // n, rid, prompts[k // n], params, leads))
    return choices


def total_usage(choices: list[Choice], finals: dict[int, RequestOutput]) -> Usage:
    """The request's usage: each prompt counted once, every choice's completion tokens."""
    leaders = [c for c in choices if c.leads]
    return Usage(
        prompt_tokens=sum(len(c.prompt_token_ids) for c in leaders),
        completion_tokens=sum(out.usage.completion_tokens for out in finals.values()),
        cached_tokens=sum(finals[c.index].usage.cached_tokens for c in leaders if c.index in finals),
    )


class UsageTally:
    """A request's running usage over its choices, kept in the request's `used` so a request
    cut short is billed by what was generated: each prompt once, every choice's tokens so far."""

    def __init__(self, choices: list[Choice], used: UsageSoFar) -> None:
        self.used = used
        self.prompt_tokens = sum(len(c.prompt_token_ids) for c in choices if c.leads)
        self.cached_tokens = 0
        self._completion: dict[int, int] = {}
        self._running: set[int] = set()  # choices started whose last delta is not in yet
        self._settled = used.settled = asyncio.Event()
        self._settled.set()
        used.prompt_tokens, used.completion_tokens = self.prompt_tokens, 0

    @property
    def completion_tokens(self) -> int:
        return self.used.completion_tokens or 0

    def started(self, choice: Choice, stream: RequestStream) -> RequestStream:
        """Count `choice`'s stream to its end, even past a consumer that leaves early: the
        request's usage is settled only when every started choice's last delta is in."""
        self._running.add(choice.index)
        self._settled.clear()
        stream.count_after_leaving(lambda out: self.add(choice, out))
        return stream

    def add(self, choice: Choice, delta: RequestOutput) -> None:
        # a running total per choice; after a cut, deltas read but never taken may come in after
        # the engine's last count, so a total only grows
        self._completion[choice.index] = max(delta.usage.completion_tokens, self._completion.get(choice.index, 0))
        if self.used.first_token_at is None and delta.usage.completion_tokens:
            self.used.first_token_at = time.perf_counter()
        self.used.completion_tokens = sum(self._completion.values())
        if choice.leads and choice.prompt_index == 0:
            self.cached_tokens = delta.usage.cached_tokens
        if delta.finished and choice.index in self._running:
            self._running.discard(choice.index)
            if not self._running:
                self._settled.set()


async def run_choices(
    choices: list[Choice], start: Callable[[Choice], RequestStream], tally: UsageTally
) -> AsyncGenerator[tuple[Choice, RequestOutput], None]:
    """Every choice's deltas as they come, tagged with their choice. `start` may raise (an
    admission error) for a prompt's first choice before anything is yielded. Leaving early
    aborts every choice still running; `tally` still gets each one's last delta (the engine's
    count), and what was read from the engine but not yet yielded."""
    if len(choices) == 1:
        async with tally.started(choices[0], start(choices[0])) as stream:
            async for delta in stream:
                yield choices[0], delta
        return
    runner = _ChoiceRunner(choices, lambda c: tally.started(c, start(c)))
    try:
        async for item in runner.deltas():
            yield item
    finally:
        for choice, left in await runner.close():
            tally.add(choice, left)


class _ChoiceRunner:
    """Several engine streams merged into one queue; siblings start after their leader's
    first delta."""

    def __init__(self, choices: list[Choice], start: Callable[[Choice], RequestStream]) -> None:
        self.choices = choices
        self.start = start
        self.queue: asyncio.Queue[tuple[Choice, RequestOutput | BaseException]] = asyncio.Queue()
        self.streams: list[RequestStream] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.waiting = {c.prompt_index for c in choices if not c.leads}  # prompts with siblings to start

    async def deltas(self) -> AsyncGenerator[tuple[Choice, RequestOutput], None]:
        for c in self.choices:
            if c.leads:
                self._launch(c)
        remaining = len(self.choices)
        while remaining:
            choice, item = await self.queue.get()
            if isinstance(item, BaseException):
                raise item
            if choice.prompt_index in self.waiting:
                self.waiting.discard(choice.prompt_index)
                for sibling in self.choices:
                    if sibling.prompt_index == choice.prompt_index and not sibling.leads:
                        self._launch(sibling)
            remaining -= item.finished
            yield choice, item

    def _launch(self, choice: Choice) -> None:
        stream = self.start(choice)
        self.streams.append(stream)
        self.tasks.append(asyncio.ensure_future(self._pump(choice, stream)))

    async def _pump(self, choice: Choice, stream: RequestStream) -> None:
        try:
            async for delta in stream:
                self.queue.put_nowait((choice, delta))
        except Exception as exc:  # noqa: BLE001 - handed to the consumer, which raises it
            self.queue.put_nowait((choice, exc))

    async def close(self) -> list[tuple[Choice, RequestOutput]]:
        """Stop every choice; the deltas read from the engine that nobody took."""
        for task in self.tasks:
            task.cancel()
        for stream in self.streams:
            with contextlib.suppress(Exception):
                await stream.aclose()
        left = []
        while not self.queue.empty():
            choice, item = self.queue.get_nowait()
            if isinstance(item, RequestOutput):
                left.append((choice, item))
        return left
