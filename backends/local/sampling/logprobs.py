"""Logprobs from logits the step already computed: no extra forward pass.

Sampled tokens: the log-softmax of the logits the sampler sees after penalties and bias, before
temperature (as vLLM documents), so a greedy run's logprobs are the model's own. Prompt tokens
(`echo` with `logprobs`): the log-softmax of the raw logits at each prompt position, which
predict the next prompt token; the first prompt token has none.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from fairgate.backends.local.engine.types import TokenLogprobs


def token_logprobs(
    logits: torch.Tensor,  # [N, V] float32, processed
    token_ids: torch.Tensor,  # [N] int64: the token whose logprob each row reports
    top_k: Sequence[int],  # per row; rows report their own k (0: only the token's own)
) -> list[TokenLogprobs]:
    """Each row's logprob of `token_ids[row]` and its top-k alternatives, best first."""
    logp = torch.log_softmax(logits.float(), dim=-1)  # [N, V]
    chosen = logp.gather(1, token_ids[:, None]).squeeze(1).tolist()  # [N]
    k_max = max(top_k, default=0)
    if k_max:
        top_vals, top_idx = logp.topk(k_max, dim=-1)  # [N, k_max] each
        vals, idx = top_vals.tolist(), top_idx.tolist()
    else:
        vals = idx = [[] for _ in chosen]
    ids = token_ids.tolist()
    return [TokenLogprobs(t, lp, i[:k], v[:k]) for t, lp, i, v, k in zip(ids, chosen, idx, vals, top_k, strict=True)]


def prompt_logprobs(
    logits: torch.Tensor,  # [n, V] raw logits of one prefill chunk's positions
    prompt_ids: Sequence[int],
    start_pos: int,
    top_k: int,
) -> dict[int, TokenLogprobs]:
    """Logprobs of the prompt tokens this chunk predicts: position -> entry.

    Row j (position start_pos + j) predicts the token at start_pos + j + 1 while that is still a
    prompt position; the chunk's last row may predict the first generated token instead (that
    one is the sampled token's logprob, not reported here).
    """
    end = min(start_pos + logits.shape[0] + 1, len(prompt_ids))
    targets = list(prompt_ids[start_pos + 1 : end])
    if not targets:
        return {}
    rows = logits[: len(targets)]  # [m, V]
    entries = token_logprobs(rows, torch.tensor(targets, device=logits.device), [top_k] * len(targets))
    return {start_pos + 1 + j: e for j, e in enumerate(entries)}
