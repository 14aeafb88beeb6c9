"""Compiling a request's grammar: off the event loop and the engine's step thread, within a time
cap, with a compiled-grammar cache of bounded memory.

Sizes are bounded where the body is read (backends/openai_wire/grammar_bounds.py); what is left
here is time. xgrammar's compile releases the GIL, so one worker thread compiles while the event
loop answers /health and streams other requests (as vLLM compiles on a thread pool and SGLang
waits on a future with a timeout). A compilation past `timeout_s` is the client's 400 naming the
field; one that never started because the worker was busy is a 429 with Retry-After (what a
gateway's breaker takes as "pause this tenant", never as the engine's fault). A started
compilation cannot be stopped: it finishes on the worker, its result cached, which is why sizes
are capped first. The cache is xgrammar's own: LRU by the compiled grammars' bytes, evicting past
`cache_bytes` (vLLM's VLLM_XGRAMMAR_CACHE_MB), so distinct schemas never grow the engine without
bound.

`guided_choice` compiles as an escaped alternation. Its compile time grows faster than the count
of choices (8k random 8-letter choices: 1.7 s, 16k: 15.8 s on this project's CPU) inside
xgrammar's compiler, not in building the pattern (milliseconds); a trie-shaped grammar measured
slower (4.1 s, 12.7 s), so the choices stay a regex and their count is capped instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

import xgrammar as xgr

from fairgate.backends.local.sampling.structured import (
    CompiledRequest,
    GrammarRequest,
    allowed_bits,
)
from fairgate.backends.openai_wire import WireError, bad_value

DEFAULT_TIMEOUT_S = 3.0
DEFAULT_CACHE_BYTES = 64 * 1024 * 1024


class StructuredCompiler:
    """One tokenizer's grammar compiler and its bounded cache."""

    def __init__(self, tokenizer_json: str, vocab: dict[str, int], vocab_size: int, eos_ids: Iterable[int],
                 decode: Callable[[list[int]], str], timeout_s: float = DEFAULT_TIMEOUT_S,
                 cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        encoded = [""] * vocab_size
        for token, idx in vocab.items():
            if idx < vocab_size:
                encoded[idx] = token
        meta = xgr.TokenizerInfo._detect_metadata_from_hf(tokenizer_json)
        info = xgr.TokenizerInfo(encoded, vocab_type=meta["vocab_type"], vocab_size=vocab_size,
                                 stop_token_ids=list(eos_ids), add_prefix_space=meta["add_prefix_space"])
        self.vocab_size = vocab_size
        self.timeout_s = timeout_s
        self._compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=True, cache_limit_bytes=cache_bytes)
        self._worker: ThreadPoolExecutor | None = None
        controls = [i for i in vocab.values() if i < vocab_size and any(ord(ch) < 0x20 for ch in decode([i]))]
        self.no_controls = allowed_bits(vocab_size, controls)  # [ceil(V / 32)] int32

    @property
    def cache_bytes(self) -> int:
        """What the compiled grammars held in the cache take now."""
        return int(self._compiler.get_cache_size_bytes())

    async def compile_async(self, req: GrammarRequest) -> CompiledRequest:
        """`compile` on the worker thread within `timeout_s` (400 past it; 429 if it never started)."""
        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="fairgate-grammar-compile",
                                              initializer=_lower_priority)
        started = threading.Event()

        def run() -> CompiledRequest:
            started.set()
            return self.compile(req)

        work = asyncio.get_running_loop().run_in_executor(self._worker, run)
        try:
            return await asyncio.wait_for(work, self.timeout_s)
        except TimeoutError:
            if not started.is_set():  # a 429 with Retry-After: a caller's breaker pauses, never counts a fault
                raise WireError(429, "The grammar compiler is busy; retry shortly.", "grammar_compiler_busy",
                                headers={"retry-after": "1"}) from None
            raise WireError(400, f"`{req.param}`: the grammar took more than {self.timeout_s:g} s to compile; "
                                 "simplify it", "grammar_too_complex", req.param) from None

    def compile(self, req: GrammarRequest) -> CompiledRequest:
        """Compile here (a JSON grammar also forbids control-character tokens)."""
        grammar = self._compile(req)
        return CompiledRequest(grammar, self.no_controls if req.kind == "json" else None)

    def _compile(self, req: GrammarRequest) -> xgr.CompiledGrammar:
        """Compile; a grammar the engine cannot build is the client's 400 naming the field."""
        try:
            if req.kind == "json" and req.value is None:
                return self._compiler.compile_builtin_json_grammar()
            if req.kind == "json":
                return self._compiler.compile_json_schema(json.dumps(req.value), any_whitespace=False,
                                                          strict_mode=True)
            if req.kind == "regex":
                return self._compiler.compile_regex(req.value)
            return self._compiler.compile_regex("|".join(re.escape(c) for c in req.value))
        except Exception as exc:  # noqa: BLE001 - xgrammar raises RuntimeError / ValueError on bad input
            raise bad_value(f"{req.param}: cannot build a grammar: {exc}", req.param) from None

    def close(self) -> None:
        if self._worker is not None:
            self._worker.shutdown(wait=False, cancel_futures=True)


def _lower_priority() -> None:
    """The compile worker yields the CPU to the event loop and the engine's step (Linux nices
    threads one by one): on a busy 2-core machine a compile otherwise delays /health polls."""
    with contextlib.suppress(OSError, AttributeError):
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + 10))
