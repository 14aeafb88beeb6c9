"""A tiny test-only engine loop over ModelRunner: hands out shuffled, non-contiguous blocks,
forces chunked prefill, and mixes prefill chunks with other sequences' decodes in one step."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from fairgate.backends.local.engine.types import RunnerInput, SamplingParams
from fairgate.backends.local.model.runner import ModelRunner


@dataclass(slots=True)
class _Seq:
    rid: str
    tokens: list[int]
    prompt_len: int
    max_new: int
    arrival_step: int
    computed: int = 0
    table: list[int] = field(default_factory=list)
    done: bool = False

    @property
    def outputs(self) -> list[int]:
        return self.tokens[self.prompt_len :]


class PagedDriver:
    def __init__(
        self, runner: ModelRunner, chunk: int = 5, seed: int | None = 0, stop_at_eos: bool = True
    ) -> None:
        self.runner = runner
        self.chunk = chunk
        self.free = list(range(runner.num_kv_blocks))[::-1]  # pop() hands out 0, 1, 2, ...
        if seed is not None:
            random.Random(seed).shuffle(self.free)  # block ids neither contiguous nor ordered
        self.stop_ids = set(runner.eos_token_ids) if stop_at_eos else set()
        self.steps = 0
        self.max_batch = 0

    def _ensure_blocks(self, seq: _Seq, upto: int) -> None:
        bs = self.runner.block_size
        while len(seq.table) * bs < upto:
            seq.table.append(self.free.pop())

    def generate(
        self,
        prompts: list[list[int]],
        max_new_tokens: int | list[int],
        params: SamplingParams | None = None,
        stagger: int = 1,
    ) -> list[list[int]]:
        """Generate for every prompt; request i joins at step i // stagger. Returns output ids."""
        params = params or SamplingParams(temperature=0.0)
        news = max_new_tokens if isinstance(max_new_tokens, list) else [max_new_tokens] * len(prompts)
        seqs = [
            _Seq(f"r{i}", list(p), len(p), n, i // stagger) for i, (p, n) in enumerate(zip(prompts, news, strict=True))
        ]
        step = 0
        while not all(s.done for s in seqs):
            batch: list[tuple[_Seq, RunnerInput]] = []
            for s in seqs:
                if s.done or s.arrival_step > step:
                    continue
                n = min(self.chunk, len(s.tokens) - s.computed)
                self._ensure_blocks(s, s.computed + n)
                last = s.computed + n == len(s.tokens)
                inp = RunnerInput(
                    s.rid, s.tokens[s.computed : s.computed + n], s.computed, list(s.table),
                    sample=last, sampling=params, num_output_tokens=len(s.outputs),
                    prompt_token_ids=s.tokens[: s.prompt_len], output_token_ids=s.outputs,
                )
                batch.append((s, inp))
            step += 1
            if not batch:
                continue
            self.max_batch = max(self.max_batch, len(batch))
            results = self.runner.execute([inp for _, inp in batch])
            for (s, inp), tok in zip(batch, results, strict=True):
                s.computed += len(inp.token_ids)
                if tok is None:
                    continue
                s.tokens.append(tok)
                if len(s.outputs) >= s.max_new or tok in self.stop_ids:
                    s.done = True
                    self.free.extend(s.table)  # stale KV stays in them: reuse must not leak
                    s.table = []
        self.steps = step
        return [s.outputs for s in seqs]
