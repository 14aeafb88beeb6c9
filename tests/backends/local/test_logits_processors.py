"""Logits processors and logprobs on small hand-made batches: exact values per row."""

from __future__ import annotations

import math

import torch

from fairgate.backends.local.engine.types import RunnerInput, SampleResult, SamplingParams
from fairgate.backends.local.sampling.logits_processors import apply_logits_processors
from fairgate.backends.local.sampling.logprobs import prompt_logprobs, token_logprobs
from fairgate.backends.local.sampling.sampler import Sampler, sample_batch

V = 6


def base() -> torch.Tensor:
    return torch.tensor([[1.0, -1.0, 2.0, 0.5, 0.0, 3.0]] * 3)  # [3, V]


def test_rows_without_processing_are_untouched() -> None:
    logits = base()
    params = [SamplingParams(), SamplingParams(frequency_penalty=0.5), SamplingParams()]
    apply_logits_processors(logits, params, [[], [], []], [[2, 2], [2, 2, 3], [5]], [4])
    assert logits[0].tolist() == base()[0].tolist() and logits[2].tolist() == base()[2].tolist()
    assert logits[1].tolist() == [1.0, -1.0, 1.0, 0.0, 0.0, 3.0]  # 2 seen twice, 3 once


def test_presence_and_repetition_penalty() -> None:
    logits = base()
    params = [SamplingParams(presence_penalty=1.5), SamplingParams(repetition_penalty=2.0), SamplingParams()]
    # repetition counts the prompt too: row 1 saw 1 (negative logit) in its prompt and 2 in its output
    apply_logits_processors(logits, params, [[0], [1], [2]], [[2, 2, 5], [2], []], [4])
    assert logits[0].tolist() == [1.0, -1.0, 0.5, 0.5, 0.0, 1.5]
    assert logits[1].tolist() == [1.0, -2.0, 1.0, 0.5, 0.0, 3.0]
    assert logits[2].tolist() == base()[2].tolist()


def test_logit_bias_and_min_tokens() -> None:
    logits = base()
    params = [
        SamplingParams(logit_bias={1: 100.0, 5: -100.0}),
        SamplingParams(min_tokens=2, stop_token_ids=[3]),
        SamplingParams(min_tokens=2, stop_token_ids=[3]),
    ]
    apply_logits_processors(logits, params, [[], [], []], [[], [7], [7, 8]], [4])
    assert logits[0].tolist() == [1.0, 99.0, 2.0, 0.5, 0.0, -97.0]
    assert logits[1, 3] == -math.inf and logits[1, 4] == -math.inf  # eos 4 and stop id 3, one token so far
    assert logits[2].tolist() == base()[2].tolist()  # two tokens: no longer forced on


def test_min_p_drops_unlikely_tokens_only() -> None:
    logits = torch.tensor([[0.0, math.log(0.5), math.log(0.09), -30.0]])  # probs ~ 1 : .5 : .09
    sampler = Sampler(torch.Generator().manual_seed(0))
    seen = {int(sampler.sample(logits, [SamplingParams(min_p=0.1, seed=s)], [0])[0]) for s in range(200)}
    assert seen == {0, 1}


def test_token_logprobs_are_log_softmax() -> None:
    logits = torch.randn(2, V, generator=torch.Generator().manual_seed(1))
    entries = token_logprobs(logits, torch.tensor([3, 0]), [2, 0])
    ref = torch.log_softmax(logits, dim=-1)
    assert entries[0].token_id == 3 and abs(entries[0].logprob - ref[0, 3].item()) < 1e-6
    assert entries[0].top_ids == ref[0].topk(2).indices.tolist() and entries[1].top_ids == []


def test_prompt_logprobs_predict_the_next_prompt_token() -> None:
    logits = torch.randn(3, V, generator=torch.Generator().manual_seed(2))  # chunk at positions 2, 3, 4
    got = prompt_logprobs(logits, [1, 2, 3, 4, 5], start_pos=2, top_k=1)
    ref = torch.log_softmax(logits, dim=-1)
    assert sorted(got) == [3, 4]  # position 5 is not a prompt position
    assert got[3].token_id == 4 and abs(got[3].logprob - ref[0, 4].item()) < 1e-6
    assert got[4].token_id == 5 and abs(got[4].logprob - ref[1, 5].item()) < 1e-6


def test_sample_batch_logprobs_see_the_bias_but_not_the_temperature() -> None:
    logits = base()[:2].clone()
    params = [SamplingParams(temperature=0, logit_bias={1: 5.0}, logprobs=1), SamplingParams(temperature=0)]
    inputs = [RunnerInput(str(i), [1], 0, [0], True, p) for i, p in enumerate(params)]
    out = sample_batch(Sampler(), logits, inputs, [4])
    assert isinstance(out[0], SampleResult) and out[0].token_id == 1 and out[1] == SampleResult(5, None)
    biased = base()[0].clone()
    biased[1] += 5.0
    assert abs(out[0].logprobs.logprob - torch.log_softmax(biased, -1)[1].item()) < 1e-6
