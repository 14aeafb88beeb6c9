"""Logits processors applied to a whole batch before sampling: repetition, presence and
frequency penalties, logit_bias, and min_tokens (eos and stop ids forbidden until then).

Each processor is a few tensor operations over the batch's [N, V] logits; the per-row inputs
(generated token ids, biases) are flattened into one index tensor per kind, so the math has no
per-sequence Python loop. Rows that ask for nothing are left untouched, and a batch where no row
asks skips everything (`any_processing`). Semantics follow vLLM / OpenAI:

- repetition_penalty r (vLLM, from CTRL): a token seen in the prompt or the output has its logit
  divided by r when positive, multiplied by r when negative.
- frequency_penalty f, presence_penalty p (OpenAI): logit -= f * count_in_output + p * (count > 0).
- logit_bias: the bias is added to the token's logit (OpenAI clamps to [-100, 100]).
- min_tokens: before that many output tokens, eos and stop_token_ids get -inf.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain

import torch

from fairgate.backends.local.engine.types import SamplingParams


def any_processing(params: Sequence[SamplingParams]) -> bool:
    return any(p.needs_processing for p in params)


def apply_logits_processors(
    logits: torch.Tensor,  # [N, V] float32, modified in place and returned
    params: Sequence[SamplingParams],
    prompt_ids: Sequence[Sequence[int]],  # per row
    output_ids: Sequence[Sequence[int]],  # per row: generated so far
    eos_token_ids: Sequence[int],
) -> torch.Tensor:
    """Apply every processor the rows ask for; the same tensor, changed in place."""
    if not any_processing(params):
        return logits
    _repetition(logits, params, prompt_ids, output_ids)
    _frequency_presence(logits, params, output_ids)
    _logit_bias(logits, params)
    _min_tokens(logits, params, output_ids, eos_token_ids)
    return logits


def _rows_and_ids(lists: Sequence[Sequence[int]], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Flatten per-row id lists into (row index, token id) tensors, each [total]."""
    lengths = torch.tensor([len(ids) for ids in lists], dtype=torch.int64)
    ids = torch.tensor(list(chain.from_iterable(lists)), dtype=torch.int64)
    rows = torch.repeat_interleave(torch.arange(len(lists)), lengths)
    return rows.to(device), ids.to(device)


def _repetition(logits: torch.Tensor, params: Sequence[SamplingParams],
                prompt_ids: Sequence[Sequence[int]], output_ids: Sequence[Sequence[int]]) -> None:
    if all(p.repetition_penalty == 1.0 for p in params):
        return
    # Only rows with a penalty contribute ids (a long prompt costs nothing when unused).
    seen_lists = [list(chain(prompt, out)) if p.repetition_penalty != 1.0 else []
                  for p, prompt, out in zip(params, prompt_ids, output_ids, strict=True)]
    rows, ids = _rows_and_ids(seen_lists, logits.device)
    seen = torch.zeros_like(logits, dtype=torch.bool)  # [N, V]
    seen[rows, ids] = True
    penalty = torch.tensor([p.repetition_penalty for p in params], device=logits.device)[:, None]  # [N, 1]
    penalised = torch.where(logits > 0, logits / penalty, logits * penalty)
    torch.where(seen, penalised, logits, out=logits)


def _frequency_presence(logits: torch.Tensor, params: Sequence[SamplingParams],
                        output_ids: Sequence[Sequence[int]]) -> None:
    if all(p.frequency_penalty == 0 and p.presence_penalty == 0 for p in params):
        return
    lists = [out if (p.frequency_penalty or p.presence_penalty) else ()
             for p, out in zip(params, output_ids, strict=True)]
    rows, ids = _rows_and_ids(lists, logits.device)
    counts = torch.zeros_like(logits)  # [N, V] occurrences in the output
    counts.index_put_((rows, ids), torch.ones_like(ids, dtype=logits.dtype), accumulate=True)
    freq = torch.tensor([p.frequency_penalty for p in params], device=logits.device)[:, None]  # [N, 1]
    pres = torch.tensor([p.presence_penalty for p in params], device=logits.device)[:, None]  # [N, 1]
    logits -= freq * counts + pres * (counts > 0)


def _logit_bias(logits: torch.Tensor, params: Sequence[SamplingParams]) -> None:
    if not any(p.logit_bias for p in params):
        return
    lists = [list(p.logit_bias) for p in params]
    rows, ids = _rows_and_ids(lists, logits.device)
    values = torch.tensor(list(chain.from_iterable(p.logit_bias.values() for p in params)),
                          dtype=logits.dtype, device=logits.device)
    logits.index_put_((rows, ids), values, accumulate=True)


def _min_tokens(logits: torch.Tensor, params: Sequence[SamplingParams],
                output_ids: Sequence[Sequence[int]], eos_token_ids: Sequence[int]) -> None:
    if not any(p.min_tokens for p in params):
        return
    lists = [
        list(chain(() if p.ignore_eos else eos_token_ids, p.stop_token_ids)) if len(out) < p.min_tokens else []
        for p, out in zip(params, output_ids, strict=True)
    ]
    rows, ids = _rows_and_ids(lists, logits.device)
    logits[rows, ids] = float("-inf")
