"""Verifying draft tokens against the target model's logits: the acceptance math, in one place.

A verify chunk of one sequence ran its last token and k draft tokens through the target, so
row j of its logits is the target's distribution p_j for the position after draft j - 1
(row 0 follows the last verified token). Both functions return the tokens the sequence keeps:
the accepted drafts and one more token from the target (a correction or the bonus), 1 to k + 1.

Greedy: drafts are accepted while they equal the target's argmax; the next argmax follows.
The result is token for token what k + 1 plain greedy steps would produce.

Sampled (Leviathan et al. 2023; gpt-fast `speculative_decode`): draft x_j is accepted with
probability min(1, p_j(x_j) / q_j(x_j)); at the first rejection the token is resampled from
normalise(max(p_j - q_j, 0)); when every draft passes a bonus token is drawn from p_k. The
kept tokens are then distributed exactly as the target alone would sample them. Our proposers
(n-gram lookup, greedy draft model) are deterministic, so q_j is one-hot at x_j: acceptance
is p_j(x_j) and the residual is p_j with x_j removed, renormalised (the standard equivalent).
"""

from __future__ import annotations

import torch

from fairgate.backends.local.engine.types import RunnerInput, SamplingParams
from fairgate.backends.local.sampling.sampler import request_generator, target_probs


def accept_greedy(target_ids: list[int], draft_ids: list[int]) -> list[int]:
    """`target_ids`: the target's argmax at the k + 1 rows; keep drafts while they agree."""
    a = 0
    while a < len(draft_ids) and draft_ids[a] == target_ids[a]:
        a += 1
    return draft_ids[:a] + [target_ids[a]]


def accept_sampled(
    logits: torch.Tensor,  # [k + 1, V] float32, the target's logits at the verify rows
    draft_ids: list[int],  # k
    params: SamplingParams,
    num_output_tokens: int,
    generator: torch.Generator | None,
    draft_probs: torch.Tensor | None = None,  # [k, V] q; None = a deterministic proposer (one-hot)
) -> list[int]:
    """Rejection sampling over one sequence's drafts; see the module docstring."""
    k = len(draft_ids)
    gen = request_generator(params, num_output_tokens, generator)
    p = target_probs(logits, params).cpu()  # [k + 1, V]
    draft = torch.tensor(draft_ids, dtype=torch.int64)  # [k]
    if draft_probs is None:
        q = torch.zeros(k, p.shape[1]).scatter_(1, draft[:, None], 1.0)  # [k, V] one-hot
    else:
        q = draft_probs.float().cpu()
    rows = torch.arange(k)
    p_x = p[rows, draft]  # [k] target probability of each draft
    q_x = q[rows, draft]  # [k] proposer probability of each draft
    accept_prob = torch.clamp(p_x / q_x, max=1.0)  # [k]
    rejected = torch.rand(k, generator=gen, dtype=torch.float32) >= accept_prob  # [k]
    if not bool(rejected.any()):
        bonus = torch.multinomial(p[k], 1, generator=gen)  # [1], from the last row
        return draft_ids + [int(bonus)]
    first = int(rejected.nonzero()[0])  # the first rejected draft
    residual = torch.clamp(p[first] - q[first], min=0.0)  # [V]
    total = residual.sum()
    if float(total) <= 0.0:  # p == q up to rounding: any token from p is exact
        residual, total = p[first], p[first].sum()
    token = torch.multinomial(residual / total, 1, generator=gen)  # [1]
    return draft_ids[:first] + [int(token)]


def verify_drafts(
    inputs: list[RunnerInput],
    logits: list[torch.Tensor],  # per input [k + 1, V]
    generator: torch.Generator | None,
) -> list[list[int]]:
    """The tokens each verify input keeps; greedy rows share one argmax and one host copy."""
    out: list[list[int]] = []
    argmax = [rows.argmax(dim=-1) for rows in logits]  # per input [k + 1]
    host = torch.cat(argmax).tolist() if argmax else []
    at = 0
    for inp, rows in zip(inputs, logits, strict=True):
        k = inp.num_spec_tokens
        drafts = inp.token_ids[len(inp.token_ids) - k :]
        if inp.sampling.greedy:
            out.append(accept_greedy(host[at : at + k + 1], drafts))
        else:
            out.append(accept_sampled(rows, drafts, inp.sampling, inp.num_output_tokens, generator))
        at += k + 1
    return out
