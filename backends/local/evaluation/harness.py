"""Drive one engine configuration through the eval: perplexity and greedy decoding, both
through fairgate's own `ModelRunner` on its paged KV cache (not transformers), so the numbers
describe what `fairgate serve` would compute with the same options."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from fairgate.backends.local.engine.output import EngineStats
from fairgate.backends.local.engine.types import RunnerInput, SamplingParams
from fairgate.backends.local.evaluation.golden import cut_at_stop
from fairgate.backends.local.model.config import ModelConfig
from fairgate.backends.local.model.runner import ModelRunner
from fairgate.backends.local.model.tokenizer import Tokenizer

Progress = Callable[[int], None]


@dataclass(slots=True)
class EngineOptions:
    """One side of the comparison. Quantization and speculative options plug in here."""

    model_dir: Path
    dtype: str = "float32"
    device: str = "cpu"
    kv_cache_dtype: str | None = None  # None = the weights' dtype
    quantization: str | None = None  # weight-only "int8" / "int4-gN"; None = as the folder holds
    # None: greedy through the harness's own loop; "off" / "ngram" / "draft:DIR": through an
    # `EngineCore` with that speculative setting (both sides of a speculative eval use the engine).
    speculative: str | None = None
    num_speculative_tokens: int = 4

    def describe(self) -> str:
        kv = f", KV {self.kv_cache_dtype}" if self.kv_cache_dtype else ""
        quant = f", weights {self.quantization}" if self.quantization else ""
        spec = f", speculative {self.speculative}" if self.speculative not in (None, "off") else ""
        return f"{self.model_dir.name} ({self.dtype}{quant}{kv}{spec}, {self.device})"


@dataclass(slots=True)
class GreedyOutput:
    token_ids: list[int]
    text: str  # cut at the first stop string


class Harness:
    """A ModelRunner with `slots` sequence slots, each owning a fixed run of KV blocks.

    Eval runs one batch at a time and every batch starts its sequences at position 0, so a
    static block table per slot is enough and nothing needs the scheduler.
    """

    def __init__(self, options: EngineOptions, max_seq_len: int, slots: int = 8,
                 block_size: int = 16) -> None:
        self.options = options
        self.tokenizer = Tokenizer(options.model_dir)
        self.seq_len = min(max_seq_len, ModelConfig.from_dir(options.model_dir).max_model_len)
        per_slot = math.ceil(self.seq_len / block_size)
        self.slots = slots
        self.last_engine_stats: EngineStats | None = None  # of the last engine_greedy run (speculative evals)
        self.runner = ModelRunner(options.model_dir, device=options.device, dtype=options.dtype,
                                  block_size=block_size, num_kv_blocks=per_slot * slots, seed=0,
                                  kv_cache_dtype=options.kv_cache_dtype,
                                  quantization=options.quantization)
        self._tables = [list(range(i * per_slot, (i + 1) * per_slot)) for i in range(slots)]
        self._greedy = SamplingParams(temperature=0.0)

    # --- perplexity -------------------------------------------------------------------
    def windows(self, text: str, ctx: int) -> list[list[int]]:
        """Non-overlapping windows of ctx+1 tokens (the first token of each is context only)."""
        ids = self.tokenizer.encode(text)
        ctx = min(ctx, self.seq_len)
        return [ids[s: s + ctx + 1] for s in range(0, len(ids) - 1, ctx) if len(ids[s: s + ctx + 1]) > 1]

    def window_logits(self, windows: list[list[int]]) -> Iterator[tuple[torch.Tensor, list[int]]]:
        """(logits [len(w)-1, vocab] float32, labels w[1:]) per window, `slots` windows a pass."""
        for b in range(0, len(windows), self.slots):
            batch = windows[b: b + self.slots]
            inputs = [RunnerInput(f"ppl-{b + i}", w[:-1], 0, self._tables[i], False, self._greedy)
                      for i, w in enumerate(batch)]
            for w, logits in zip(batch, self.runner.forward_logits(inputs), strict=True):
                yield logits.float(), w[1:]

    def nll(self, windows: list[list[int]], progress: Progress | None = None) -> tuple[float, int]:
        """Summed negative log-likelihood (nats) of every predicted token, and their count."""
        total, count = 0.0, 0
        for logits, labels in self.window_logits(windows):
            target = torch.tensor(labels, device=logits.device)
            total += torch.nn.functional.cross_entropy(logits, target, reduction="sum").item()
            count += len(labels)
            if progress:
                progress(1)
        return total, count

    # --- greedy decoding ---------------------------------------------------------------
    def greedy(self, prompts: list[str], max_tokens: list[int], stops: list[list[str]],
               progress: Progress | None = None) -> list[GreedyOutput]:
        """Greedy completions of each prompt, batched `slots` at a time."""
        if self.options.speculative is not None:
            from fairgate.backends.local.evaluation.engine_greedy import engine_greedy

            return engine_greedy(self, prompts, max_tokens, stops, progress)
        out: list[GreedyOutput] = []
        for b in range(0, len(prompts), self.slots):
            out.extend(self._greedy_batch(prompts[b: b + self.slots], max_tokens[b: b + self.slots],
                                          stops[b: b + self.slots]))
            if progress:
                progress(len(prompts[b: b + self.slots]))
        return out

    def _greedy_batch(self, prompts: list[str], max_tokens: list[int],
                      stops: list[list[str]]) -> list[GreedyOutput]:
        eos = set(self.runner.eos_token_ids)
        outs: list[list[int]]
        seqs, outs, done = [], [[] for _ in prompts], [False] * len(prompts)
        for p, n in zip(prompts, max_tokens, strict=True):
            ids = self.tokenizer.encode(p)
            seqs.append(ids[-max(1, self.seq_len - n):])  # keep the prompt's end if it is too long
        limits = [min(n, self.seq_len - len(s)) for s, n in zip(seqs, max_tokens, strict=True)]
        texts = [""] * len(prompts)
        # Step 0 prefills whole prompts; each later step feeds the last sampled token.
        pending = {i: (seqs[i], 0) for i in range(len(prompts))}
        while pending:
            order = sorted(pending)
            inputs = [RunnerInput(f"g-{i}", pending[i][0], pending[i][1], self._tables[i], True,
                                  self._greedy, len(outs[i])) for i in order]
            for i, tok in zip(order, self.runner.execute(inputs), strict=True):
                pos = pending[i][1] + len(pending[i][0])
                assert isinstance(tok, int)  # a plain greedy sample: one token id
                if tok in eos:
                    done[i] = True
                else:
                    outs[i].append(tok)
                    texts[i], hit = cut_at_stop(self.tokenizer.decode(outs[i]), stops[i])
                    done[i] = hit or len(outs[i]) >= limits[i]
                pending.pop(i)
                if not done[i]:
                    pending[i] = ([tok], pos)
        return [GreedyOutput(o, t) for o, t in zip(outs, texts, strict=True)]
