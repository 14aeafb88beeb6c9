"""The draft-model proposer's own rounds: its guesses are the draft model's greedy continuation,
batched over sequences wanting different k, and after a rejection it resumes from what is
still the sequence (its KV cache rewritten there), freeing its blocks when a request goes."""

from __future__ import annotations

from pathlib import Path

import pytest

from fairgate.backends.local.engine.config import EngineConfig
from fairgate.backends.local.engine.core import EngineCore
from fairgate.backends.local.engine.factory import build_engine_parts
from fairgate.backends.local.engine.output import OutputTracker
from fairgate.backends.local.engine.types import SamplingParams
from fairgate.backends.local.model.runner import ModelRunner
from fairgate.backends.local.speculative.draft_proposer import DraftModelProposer
from fairgate.backends.local.speculative.proposers import ProposalRequest
from fairgate.scheduler.queue import FCFSQueue
from fairgate.scheduler.request import SchedRequest
from tests.helpers.tiny_models import make_tiny_model

PROMPTS = [list(range(30, 47)), [5, 6, 7, 8, 9], [200, 201, 202, 203] * 5 + [7]]


@pytest.fixture(scope="module")
def draft_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny-draft"), "llama", seed=7)


def greedy(model: Path, prompts: list[list[int]], n: int) -> list[list[int]]:
    """The plain engine's greedy continuation of each prompt by `model`."""
    config = EngineConfig(str(model), num_kv_blocks=64, block_size=4, enable_prefix_caching=False)
    core = EngineCore(build_engine_parts(config, wait_queue=FCFSQueue()))
    sampling = SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True)
    for i, p in enumerate(prompts):
        core.add(SchedRequest(f"g{i}", list(p), n), OutputTracker(f"g{i}", sampling, len(p), n, frozenset(), None))
    outs: dict[str, list[int]] = {f"g{i}": [] for i in range(len(prompts))}
    while core.has_unfinished:
        for out in core.step().outputs:
            outs[out.request_id] += out.token_ids
    return [outs[f"g{i}"] for i in range(len(prompts))]


def test_rounds_propose_the_draft_models_greedy_continuation(draft_dir: Path) -> None:
    # a float head: the greedy continuation of the model itself (the int8 head's rounding
    # can change a guess where a tiny random model's top two logits are close)
    proposer = DraftModelProposer(ModelRunner(draft_dir, block_size=4, num_kv_blocks=64), int8_head=False)
    free_blocks = proposer.kv.num_free_blocks
    reference = greedy(draft_dir, PROMPTS, 6)
    ks = [4, 1, 3]  # one batch, sequences leaving it after their own k
    drafts = proposer.propose([ProposalRequest(f"r{i}", p, k) for i, (p, k) in enumerate(zip(PROMPTS, ks, strict=True))])
    assert drafts == {f"r{i}": reference[i][:k] for i, k in enumerate(ks)}

    # r0: two guesses accepted, then a token the draft did not guess (the target's correction);
    # r2: every guess accepted plus a bonus token. The next proposals continue from there.
    wrong = (reference[0][2] + 1) % 100
    moved = [PROMPTS[0] + reference[0][:2] + [wrong], PROMPTS[2] + reference[2][:4]]
    expected = greedy(draft_dir, moved, 4)
    again = proposer.propose([ProposalRequest("r0", moved[0], 4), ProposalRequest("r2", moved[1], 2)])
    assert again == {"r0": expected[0], "r2": expected[1][:2]}

    for i in range(len(PROMPTS)):
        proposer.drop(f"r{i}")
    assert proposer.kv.num_free_blocks == free_blocks


def test_a_large_draft_head_runs_on_int8_codes_and_ranks_as_the_float_one() -> None:
    import torch

    from fairgate.backends.local.speculative.draft_forward import (
        INT8_HEAD_MIN_BYTES,
        _int8_head,
    )
    from fairgate.kernels import KernelPlan

    plan = KernelPlan.choose("cpu")
    gen = torch.Generator().manual_seed(3)
    assert _int8_head(torch.randn(512, 64, generator=gen), plan) is None  # 128 KiB: stays float
    weight = torch.randn(6144, 128, generator=gen)
    assert weight.numel() * 4 >= INT8_HEAD_MIN_BYTES
    head = _int8_head(weight, plan)
    if head is None:
        pytest.skip("the native int8 kernels did not build here")
    hidden = torch.randn(256, 128, generator=gen)
    same = (head(hidden).argmax(-1) == (hidden @ weight.T).argmax(-1)).float().mean().item()
    assert same >= 0.9  # rows of random logits, where the top two are often close
