"""Grammar compilation off the event loop, within a time cap, into a cache of bounded memory."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from fairgate.backends.local.engine.async_engine import AsyncEngine, EngineConfig
from fairgate.backends.local.sampling.structured import GrammarRequest
from fairgate.backends.local.serving.backend import LocalBackend
from fairgate.backends.openai_wire import WireError


def schema(seed: int, n: int) -> dict:
    return {"type": "object", "properties": {f"s{seed}_p{i}": {"type": "integer"} for i in range(n)},
            "required": [f"s{seed}_p0"]}


def choices(n: int, seed: int = 0) -> GrammarRequest:
    return GrammarRequest("choice", [f"option-{seed}-{i}-{i * 7919 % 104729}" for i in range(n)], "guided_choice")


async def test_compilation_leaves_the_event_loop_free(tiny_model_dir: Path) -> None:
    engine = AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=16, grammar_timeout_s=120))
    grammars = LocalBackend(engine).info.grammars
    assert grammars is not None
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    try:
        tick = asyncio.create_task(ticker())
        # a grammar big enough to take a while on this CPU: a faster CPU gets more choices
        for seed, n in enumerate((1000, 3000, 8000)):
            gaps.clear()
            t0 = time.perf_counter()
            compiled = await grammars.compile_async(choices(n, seed))
            took = time.perf_counter() - t0
            if took > 0.1:
                break
        done.set()
        await tick
        assert compiled.grammar is not None and compiled.allowed_bits is None
        # the loop kept running while xgrammar compiled on the worker (it releases the GIL)
        assert took > 0.1 and len(gaps) > 5 and max(gaps) < took
    finally:
        await engine.aclose()


async def test_past_the_time_cap_is_a_400_and_a_queued_one_a_429(tiny_model_dir: Path) -> None:
    engine = AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=16, grammar_timeout_s=0.02))
    grammars = LocalBackend(engine).info.grammars
    assert grammars is not None
    try:
        slow, queued = await asyncio.gather(grammars.compile_async(choices(1000, 1)),
                                            grammars.compile_async(choices(1000, 2)), return_exceptions=True)
        assert isinstance(slow, WireError) and (slow.status, slow.code, slow.param) == (
            400, "grammar_too_complex", "guided_choice")
        # busy is no fault of the engine's: a 429 with Retry-After, which a gateway's breaker never counts
        assert isinstance(queued, WireError) and queued.status == 429 and queued.headers["retry-after"] == "1"
    finally:
        await engine.aclose()


def test_the_compiled_grammar_cache_is_bounded(tiny_model_dir: Path) -> None:
    limit = 1 << 20
    engine = AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=16, grammar_cache_bytes=limit))
    grammars = LocalBackend(engine).info.grammars
    assert grammars is not None
    try:
        sizes = []
        for seed in range(12):  # 12 distinct schemas: each alone is a sizeable share of the limit
            grammars.compile(GrammarRequest("json", schema(seed, 150), "response_format"))
            sizes.append(grammars.cache_bytes)
        assert sizes[0] > 0
        # LRU eviction keeps it near the bound (xgrammar may pass it by about one grammar)
        assert max(sizes) <= limit + sizes[0]
        assert sizes[-1] < sizes[0] * 4  # without eviction: about 12 grammars' worth
    finally:
        engine.close()


def test_bad_limits_in_the_engine_config_are_refused(tiny_model_dir: Path) -> None:
    with pytest.raises(ValueError):
        EngineConfig(str(tiny_model_dir), request_limits=("max_nn=3",)).validate()
    with pytest.raises(ValueError):
        EngineConfig(str(tiny_model_dir), grammar_timeout_s=0).validate()
