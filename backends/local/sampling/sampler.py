"""Batched token sampling: logits processors, greedy, temperature, top-k, top-p, min-p,
per-request seeds, and the sampled tokens' logprobs.

Every row draws with one uniform number through the inverse CDF of its filtered distribution.
A seeded request takes that number from a generator seeded by (seed, tokens generated so far),
so its tokens depend only on its own logits and seed, never on which other requests share the
batch or the step. Stop conditions (eos, stop strings, max_tokens) are the engine's job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future

import torch

from fairgate.backends.local.engine.types import (
    RunnerInput,
    SampleResult,
    SamplingParams,
)
from fairgate.backends.local.sampling.logits_processors import apply_logits_processors
from fairgate.backends.local.sampling.logprobs import token_logprobs
from fairgate.backends.local.sampling.structured import GrammarMasks, fill_grammar_masks

_MASK64 = (1 << 64) - 1


def _mix_seed(seed: int, step: int) -> int:
    """A 63-bit generator seed from (seed, step); splitmix64 finaliser so nearby inputs diverge."""
    z = (seed * 0x9E3779B97F4A7C15 + step + 0x632BE59BD9B4E019) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (z ^ (z >> 31)) >> 1


def _first_argmax(logits: torch.Tensor) -> torch.Tensor:  # [N, V] -> [N] int64, first index on ties
    return logits.argmax(dim=-1)


class Sampler:
    """Picks one token per row of a logits batch. `generator` drives unseeded rows; `argmax`
    ([N, V] -> [N] int64) is the runner's kernel plan's (`KernelPlan.argmax`)."""

    def __init__(self, generator: torch.Generator | None = None,
                 argmax: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
        self.generator = generator
        self._argmax = argmax or _first_argmax

    def __call__(
        self,
        logits: torch.Tensor,  # [N, V] float32
        params: Sequence[SamplingParams],
        num_output_tokens: Sequence[int],
    ) -> list[int]:
        return self.sample(logits, params, num_output_tokens).tolist()

    def sample(
        self,
        logits: torch.Tensor,  # [N, V]
        params: Sequence[SamplingParams],
        num_output_tokens: Sequence[int],
    ) -> torch.Tensor:  # [N] int64, on logits.device
        vocab = logits.shape[1]
        greedy = [p.greedy for p in params]
        argmax: torch.Tensor = self._argmax(logits)  # [N]
        if all(greedy):
            return argmax
        device = logits.device
        probs, order = filtered_probs(logits, params)
        # float64 so u * total stays below the last cumulative value (never past the support).
        cdf = probs.double().cumsum(dim=-1)  # [N, V], unnormalised when top-p removed mass

        u = self._uniforms(params, num_output_tokens).to(device)  # [N] float64 in [0, 1)
        target = (u * cdf[:, -1])[:, None]  # [N, 1]
        idx = torch.searchsorted(cdf, target, right=True).clamp_(max=vocab - 1)  # [N, 1]
        tokens = order.gather(1, idx) if order is not None else idx
        greedy_t = torch.tensor(greedy, device=device)
        return torch.where(greedy_t, argmax, tokens.squeeze(1))

    def _uniforms(self, params: Sequence[SamplingParams], num_output_tokens: Sequence[int]) -> torch.Tensor:
        u = torch.rand(len(params), generator=self.generator, dtype=torch.float64)
        for i, (p, step) in enumerate(zip(params, num_output_tokens, strict=True)):
            if p.seed is not None and not p.greedy:
                gen = torch.Generator().manual_seed(_mix_seed(p.seed, step))
                u[i] = torch.rand(1, generator=gen, dtype=torch.float64)[0]
        return u


def sample_batch(
    sampler: Sampler,
    logits: torch.Tensor,  # [N, V] float32, one row per sampling input; processed in place
    inputs: Sequence[RunnerInput],
    eos_token_ids: Sequence[int],
    grammar_masks: Future[GrammarMasks] | None = None,
) -> list[int] | list[SampleResult]:
    """Process, sample and (when any row asks) take logprobs for one step's sampling rows.

    Returns plain token ids when no row asked for logprobs, else one `SampleResult` per row
    (rows that did not ask carry `logprobs=None`). `grammar_masks`: the step's structured
    output masks (GrammarMasker.start, filled while the forward pass ran); None fills them here.
    """
    params = [inp.sampling for inp in inputs]
    apply_logits_processors(
        logits, params, [inp.prompt_token_ids for inp in inputs], [inp.output_token_ids for inp in inputs],
        eos_token_ids,
    )
    if grammar_masks is not None:
        grammar_masks.result().apply(logits)
    elif any(p.grammar_state is not None for p in params):
        states = [p.grammar_state for p in params]
        fill_grammar_masks(states, [inp.output_token_ids for inp in inputs], logits.shape[1]).apply(logits)
    tokens = sampler.sample(logits, params, [inp.num_output_tokens for inp in inputs])  # [N]
    if all(p.logprobs is None for p in params):
        return tokens.tolist()
    entries = token_logprobs(logits, tokens, [p.logprobs or 0 for p in params])
    return [SampleResult(e.token_id, e if p.logprobs is not None else None) for e, p in zip(entries, params, strict=True)]


def filtered_probs(
    logits: torch.Tensor,  # [N, V]
    params: Sequence[SamplingParams],
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Each row's distribution after temperature, top-k, top-p and min-p (greedy rows at temperature 1).

    Returns (probs [N, V], order): when top-k or top-p is in use `probs` is sorted descending
    and `order[n, j]` is the token id of column j; otherwise `order` is None (vocabulary order).
    Rows cut by top-p are not renormalised (the caller's CDF scales by its total)."""
    vocab = logits.shape[1]
    device = logits.device
    temps = torch.tensor([1.0 if p.greedy else p.temperature for p in params])
    x = logits.float() / temps.to(device)[:, None]  # [N, V]
    use_top_k = any(p.top_k > 0 for p in params)
    use_top_p = any(p.top_p < 1.0 for p in params)
    order: torch.Tensor | None = None
    if use_top_k or use_top_p:
        x, order = x.sort(dim=-1, descending=True)  # [N, V] each
        if use_top_k:
            ks = torch.tensor([p.top_k if p.top_k > 0 else vocab for p in params], device=device)
            ranks = torch.arange(vocab, device=device)
            x.masked_fill_(ranks[None, :] >= ks[:, None], float("-inf"))
    probs = torch.softmax(x, dim=-1)  # [N, V]
    if use_top_p:
        top_ps = torch.tensor([p.top_p if p.top_p < 1.0 else 2.0 for p in params], device=device)
        mass_before = probs.cumsum(dim=-1) - probs  # [N, V]
        # Keep the smallest prefix whose mass reaches top_p (the first token always stays).
        probs = probs.masked_fill(mass_before >= top_ps[:, None], 0.0)
    if any(p.min_p > 0 for p in params):
        min_ps = torch.tensor([p.min_p for p in params], dtype=probs.dtype, device=device)  # [N]
        top = probs.max(dim=-1, keepdim=True).values  # [N, 1]; the top token always stays
        probs = probs.masked_fill(probs < min_ps[:, None] * top, 0.0)
    return probs, order


def target_probs(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """[N, V] normalised, in vocabulary order: the distribution `Sampler` draws from, per row."""
    probs, order = filtered_probs(logits, [params] * logits.shape[0])
    if order is not None:
        probs = torch.zeros_like(probs).scatter_(1, order, probs)
    return probs / probs.sum(dim=-1, keepdim=True)


def request_generator(params: SamplingParams, num_output_tokens: int,
                      default: torch.Generator | None) -> torch.Generator | None:
    """A seeded request's own generator at this point of its output, else `default`."""
    if params.seed is None:
        return default
    return torch.Generator().manual_seed(_mix_seed(params.seed, num_output_tokens))
