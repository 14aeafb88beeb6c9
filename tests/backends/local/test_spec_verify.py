"""Acceptance math: greedy keeps the agreeing prefix; rejection sampling keeps the distribution."""

from __future__ import annotations

import torch

from fairgate.backends.local.engine.types import SamplingParams
from fairgate.backends.local.sampling.sampler import target_probs
from fairgate.backends.local.speculative.proposers import NgramProposer, ProposalRequest
from fairgate.backends.local.speculative.verify import accept_greedy, accept_sampled

V = 6
# Chi-square critical value for 5 degrees of freedom at p = 0.001: a correct sampler fails
# this once in a thousand runs; the seeds are fixed, so the test is deterministic.
CHI2_5DOF_P001 = 20.515


def chi_square(counts: torch.Tensor, probs: torch.Tensor) -> float:
    expected = probs * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


def test_greedy_keeps_drafts_while_they_agree_then_the_targets_token() -> None:
    assert accept_greedy([5, 6, 7, 8], [5, 6, 9]) == [5, 6, 7]
    assert accept_greedy([5, 6, 7, 8], [5, 6, 7]) == [5, 6, 7, 8]  # all pass: the bonus token
    assert accept_greedy([4, 6, 7, 8], [5, 6, 7]) == [4]


N = 5000


def sample_many(logits: torch.Tensor, drafts: list[int], params: SamplingParams,
                draft_probs: torch.Tensor | None = None) -> list[list[int]]:
    """N verifies; with `draft_probs` each run's draft is drawn from q (as a draft model would)."""
    gen = torch.Generator().manual_seed(1234)
    runs = []
    for _ in range(N):
        if draft_probs is not None:
            drafts = torch.multinomial(draft_probs, 1, generator=gen)[:, 0].tolist()
        runs.append(accept_sampled(logits, drafts, params, 0, gen, draft_probs))
    return runs


def test_rejection_sampling_with_a_deterministic_proposer_keeps_the_targets_distribution() -> None:
    torch.manual_seed(0)
    logits = torch.randn(3, V) * 1.5  # [k + 1, V], two drafts
    params = SamplingParams(temperature=0.8)
    p = target_probs(logits, params)  # [3, V]
    drafts = [int(p[0].argsort()[-2]), 3]  # a likely first draft, an arbitrary second
    runs = sample_many(logits, drafts, params)
    first = torch.bincount(torch.tensor([r[0] for r in runs]), minlength=V).double()
    assert chi_square(first, p[0].double()) < CHI2_5DOF_P001
    # The first draft is kept exactly when it was accepted (the residual excludes it), and
    # then the second token must follow the target's row-1 distribution.
    second = torch.bincount(torch.tensor([r[1] for r in runs if r[0] == drafts[0]]), minlength=V).double()
    assert second.sum() > 500 and chi_square(second, p[1].double()) < CHI2_5DOF_P001
    assert all(1 <= len(r) <= 3 for r in runs) and any(len(r) == 3 for r in runs)


def test_rejection_sampling_with_draft_probabilities_keeps_the_targets_distribution() -> None:
    torch.manual_seed(1)
    logits = torch.randn(2, V)
    q = torch.softmax(torch.randn(1, V), dim=-1)  # [k, V]
    params = SamplingParams(temperature=1.0, top_k=4)
    p = target_probs(logits, params)
    support = p[0] > 0
    runs = sample_many(logits, [], params, draft_probs=q)
    first = torch.bincount(torch.tensor([r[0] for r in runs]), minlength=V).double()
    assert first[~support].sum() == 0  # top-k holds even after a rejection
    dof3 = 16.266  # 4 tokens in the support: 3 degrees of freedom, p = 0.001
    assert chi_square(first[support], p[0][support].double()) < dof3


def test_ngram_lookup_proposes_what_followed_the_latest_match() -> None:
    prop = NgramProposer(min_n=1, max_n=3)
    # "... 1 2 3 [4 5 6] ... 1 2 3" -> 4 5 6 (the 3-gram matches)
    assert prop.lookup([1, 2, 3, 4, 5, 6, 9, 1, 2, 3], 3) == [4, 5, 6]
    # the latest earlier occurrence wins: 2 3 -> 8 (not 4)
    assert prop.lookup([2, 3, 4, 0, 2, 3, 8, 7, 2, 3], 2) == [8, 7]
    assert prop.lookup([1, 2, 3, 4], 3) == []  # no repeat: no guess
    assert prop.lookup([7, 7, 7], 4) == [7, 7, 7, 7]  # a repetition is copied on past the end
    assert prop.lookup([1, 2, 3, 1, 2, 3, 1], 5) == [2, 3, 1, 2, 3]
    out = prop.propose([ProposalRequest("a", [1, 2, 1], 2), ProposalRequest("b", [1, 2], 2)])
    assert out == {"a": [2, 1]}  # [1, 2, 1]: after the 1 at 0 came 2, 1
