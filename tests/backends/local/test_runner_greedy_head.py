"""The runner takes a step's greedy tokens from the greedy head (kernels/native/cpu_greedy.c) when
every sampling row is greedy (a plain row or a verify of drafts), and they are the tokens the
full logits give; any row that needs its logits (logprobs, a penalty, a bias, sampling) sends the
whole step down the logits path."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from fairgate.backends.local.engine.types import (
    RunnerInput,
    SamplingParams,
)
from fairgate.backends.local.model.runner import ModelRunner
from tests.helpers.tiny_models import make_tiny_model

GREEDY = SamplingParams(temperature=0.0)


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> ModelRunner:
    folder = make_tiny_model(tmp_path_factory.mktemp("greedy-head"), "llama", seed=4)
    runner = ModelRunner(folder, block_size=16, num_kv_blocks=48)
    if runner.greedy_head is None:
        pytest.skip("the native CPU kernels did not build here")
    return runner


def inputs_with(params: list[SamplingParams], spec: int = 0) -> list[RunnerInput]:
    out = []
    for i, p in enumerate(params):
        tokens = [5 + i, 9, 11] if i == 0 else [7 + i]
        table = list(range(6 * i, 6 * i + 6))
        out.append(RunnerInput(f"r{i}", tokens + ([3] * spec if i == 1 else []), 20 + i, table, True, p,
                               num_output_tokens=2, prompt_token_ids=[1, 2, 3], output_token_ids=[4, 5],
                               num_spec_tokens=spec if i == 1 else 0))
    return out


def run(runner: ModelRunner, inputs: list[RunnerInput], head: bool) -> tuple[list, int]:
    calls = []
    real = runner.greedy_head

    def spy(hidden: torch.Tensor):
        calls.append(hidden.shape[0])
        return real(hidden)

    runner.greedy_head = spy if head else None  # type: ignore[assignment]
    gen = torch.Generator().manual_seed(0)
    runner.kv_cache.copy_(torch.randn(runner.kv_cache.shape, generator=gen))
    runner.sampler.generator.manual_seed(3)
    try:
        return runner.execute(inputs), len(calls)
    finally:
        runner.greedy_head = real


def test_plain_greedy_steps_take_the_head_and_its_tokens_are_the_logits_argmax(runner: ModelRunner) -> None:
    inputs = inputs_with([GREEDY] * 5)
    with_head, calls = run(runner, inputs, head=True)
    without, _ = run(runner, inputs, head=False)
    assert calls == 1
    assert with_head == without and all(isinstance(t, int) for t in with_head)


@pytest.mark.parametrize("other", [
    replace(GREEDY, logprobs=2), replace(GREEDY, presence_penalty=0.5), replace(GREEDY, logit_bias={3: 5.0}),
    replace(GREEDY, min_tokens=4), SamplingParams(temperature=0.8, seed=7),
])
def test_a_row_that_needs_its_logits_sends_the_step_down_the_logits_path(runner: ModelRunner,
                                                                        other: SamplingParams) -> None:
    inputs = inputs_with([GREEDY, GREEDY, other, GREEDY])
    with_head, calls = run(runner, inputs, head=True)
    without, _ = run(runner, inputs, head=False)
    assert calls == 0
    assert with_head == without


def test_a_greedy_verify_step_takes_the_head_and_keeps_the_drafts_the_logits_keep(runner: ModelRunner) -> None:
    inputs = inputs_with([GREEDY, GREEDY, GREEDY], spec=2)
    with_head, calls = run(runner, inputs, head=True)
    without, _ = run(runner, inputs, head=False)
    assert calls == 1 and with_head == without
    assert isinstance(with_head[1], list) and 1 <= len(with_head[1]) <= 3


def test_a_verify_step_keeps_every_draft_the_argmax_agrees_with(runner: ModelRunner) -> None:
    """Drafts set to the target's own argmax at each position are all kept, plus the bonus:
    the head's row-per-position argmax lines up with the drafts it checks."""
    probe = inputs_with([GREEDY, GREEDY], spec=3)
    without, _ = run(runner, probe, head=False)
    first = without[1]
    assert isinstance(first, list) and len(first) >= 1
    # Row j's argmax depends only on the tokens before it: replace drafts one at a time with
    # the argmax the logits path reports, until every draft agrees.
    for _ in range(3):
        tokens = probe[1].token_ids
        kept = run(runner, probe, head=False)[0][1]
        assert isinstance(kept, list)
        drafts = tokens[len(tokens) - 3:]
        fixed = (kept + drafts)[:3] if len(kept) <= 3 else kept[:3]
        probe[1] = replace(probe[1], token_ids=tokens[: len(tokens) - 3] + fixed)
    with_head, calls = run(runner, probe, head=True)
    without, _ = run(runner, probe, head=False)
    assert calls == 1 and with_head == without
    assert with_head[1][:3] == probe[1].token_ids[-3:] and len(with_head[1]) == 4


def test_a_sampled_row_beside_a_verify_sends_the_step_down_the_logits_path(runner: ModelRunner) -> None:
    inputs = inputs_with([GREEDY, GREEDY, SamplingParams(temperature=0.8, seed=7)], spec=2)
    with_head, calls = run(runner, inputs, head=True)
    without, _ = run(runner, inputs, head=False)
    assert calls == 0 and with_head == without
