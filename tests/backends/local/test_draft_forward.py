"""LeanForward's one-call native decode round (kernels/native/cpu_draft.c) computes what its per-op
path computes: the same hidden states up to float32 summation order (~4e-6 here), over random KV contexts
of different lengths and block tables (GQA, sequences spanning several blocks, qkv biases),
and the same greedy guesses in the proposer on the demo draft."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fairgate.backends.local.model.llama import AttentionMetadata
from fairgate.backends.local.model.runner import ModelRunner
from fairgate.backends.local.speculative.draft_forward import LeanForward
from fairgate.backends.local.speculative.draft_proposer import DraftModelProposer
from fairgate.backends.local.speculative.proposers import ProposalRequest
from tests.helpers.tiny_models import make_tiny_model

DEMO_DRAFT = Path(__file__).resolve().parents[3] / "models" / "fairgate-demo-draft"


# llama: 4 query heads over 2 KV heads (GQA), head_dim 16; qwen2 adds qkv biases; qwen3 per-head q/k
# norms and head_dim 32 (not hidden / heads); "narrow": linears
# whose widths (qkv 80, gate_up 160, o and down 48) end in part-width weight panels (16, 32, 48)
TINY = {"llama": ("llama", {}), "qwen2": ("qwen2", {}), "qwen3": ("qwen3", {}),
        "narrow": ("llama", dict(hidden_size=48, num_attention_heads=3, num_key_value_heads=1, intermediate_size=80))}


@pytest.fixture(scope="module", params=sorted(TINY))
def tiny_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    arch, overrides = TINY[request.param]
    return make_tiny_model(tmp_path_factory.mktemp(f"tiny-{request.param}"), arch, seed=5, **overrides)


def lean_for(folder: Path, block_size: int) -> tuple[ModelRunner, LeanForward]:
    runner = ModelRunner(folder, block_size=block_size, num_kv_blocks=64)
    lean = LeanForward.load(runner.model_dir, runner.config, runner.model)
    assert lean is not None
    if lean._round is None:
        pytest.skip("the native CPU kernels did not build here")
    return runner, lean


def decode_meta(runner: ModelRunner, positions: list[int], tables: list[list[int]]) -> AttentionMetadata:
    """One decode token per sequence at `positions` (the proposer's rounds j >= 1)."""
    bs = runner.block_size
    width = max(len(t) for t in tables)
    return AttentionMetadata(
        slot_mapping=torch.tensor([t[p // bs] * bs + p % bs for p, t in zip(positions, tables, strict=True)]),
        cos_sin=runner.model.cos_sin.index_select(0, torch.tensor(positions)),
        num_decodes=len(positions),
        decode_block_tables=torch.tensor([t + [0] * (width - len(t)) for t in tables], dtype=torch.int32),
        decode_seq_lens=torch.tensor([p + 1 for p in positions], dtype=torch.int32),
        decode_max_seq_len=max(positions) + 1,
        prefill_block_tables=None, prefill_query_start_loc=None, prefill_seq_lens=None,
    )


def both_paths(runner: ModelRunner, lean: LeanForward, positions: list[int],
               seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The native and the per-op hidden states of one decode step over random cached contexts
    (the native one from the step's metadata and from positions alone: the same bits).

    Each path writes the new token's K and V itself before attending, so the order of the two
    runs does not matter; the rest of the context is random cache contents."""
    gen = torch.Generator().manual_seed(seed)
    for k_cache, v_cache, _, _ in runner.kv_caches:
        k_cache.copy_(torch.randn(k_cache.shape, generator=gen))
        v_cache.copy_(torch.randn(v_cache.shape, generator=gen))
    bs, blocks = runner.block_size, torch.randperm(64, generator=gen).tolist()
    tables, used = [], 0
    for p in positions:  # distinct, shuffled blocks per sequence
        tables.append(blocks[used: used + p // bs + 1])
        used += p // bs + 1
    meta = decode_meta(runner, positions, tables)
    ids = torch.randint(0, runner.config.vocab_size, (len(positions),), generator=gen)
    native = lean.hidden(ids, runner.kv_caches, meta)
    assert meta.decode_block_tables is not None
    at = lean.decode_hidden(ids, runner.kv_caches, torch.tensor(positions), meta.decode_block_tables)
    assert at is not None and torch.equal(at, native)
    round_fn, lean._round = lean._round, None
    try:
        per_op = lean.hidden(ids, runner.kv_caches, meta)
    finally:
        lean._round = round_fn
    return native, per_op


@pytest.mark.parametrize("positions", [[0], [13], [2, 29, 9]])
def test_native_round_matches_the_per_op_path_on_a_tiny_model(tiny_dir: Path, positions: list[int]) -> None:
    runner, lean = lean_for(tiny_dir, block_size=4)  # position 29: eight blocks
    native, per_op = both_paths(runner, lean, positions, seed=sum(positions))
    assert native.shape == (len(positions), runner.config.hidden_size)
    torch.testing.assert_close(native, per_op, atol=1e-4, rtol=1e-5)
    assert not torch.equal(native[:1], per_op[-1:])  # rows are each sequence's own


@pytest.mark.parametrize("positions", [[300], [16, 140, 47]])
def test_native_round_matches_the_per_op_path_on_the_demo_draft(positions: list[int]) -> None:
    runner, lean = lean_for(DEMO_DRAFT, block_size=16)  # 2 query heads over 1 KV head, head_dim 64
    native, per_op = both_paths(runner, lean, positions, seed=len(positions))
    torch.testing.assert_close(native, per_op, atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("kv_cache_dtype", [None, "int8"])
def test_the_proposer_takes_the_native_round_for_decode_rounds_on_float_caches(
        tiny_dir: Path, kv_cache_dtype: str | None) -> None:
    runner = ModelRunner(tiny_dir, block_size=4, num_kv_blocks=64, kv_cache_dtype=kv_cache_dtype)
    proposer = DraftModelProposer(runner)
    lean = proposer._forward.__self__  # type: ignore[attr-defined]
    if lean._round is None:
        pytest.skip("the native CPU kernels did not build here")
    batches: list[int] = []
    native = proposer._native_decode
    assert native is not None

    def counting(input_ids: torch.Tensor, *args: object) -> torch.Tensor | None:
        out = native(input_ids, *args)  # type: ignore[arg-type]
        batches.append(len(input_ids) if out is not None else -1)
        return out

    proposer._native_decode = counting
    drafts = proposer.propose([ProposalRequest("a", list(range(30, 47)), 4), ProposalRequest("b", [5, 6, 7], 2)])
    assert [len(drafts["a"]), len(drafts["b"])] == [4, 2]
    # round 0 (the ragged catch-up) is per-op; rounds 1-3 are native, "b" leaving after round 1;
    # an int8 cache (its scales beside it) declines, and the rounds take the per-op path
    assert batches == ([2, 1, 1] if kv_cache_dtype is None else [-1, -1, -1])
    # after a verify (one guess kept, one corrected) each catches up by one token: round 0 is a
    # native round of both too
    batches.clear()
    again = proposer.propose([ProposalRequest("a", list(range(30, 47)) + drafts["a"][:1] + [9], 4),
                              ProposalRequest("b", [5, 6, 7] + drafts["b"][:1] + [9], 2)])
    assert [len(again["a"]), len(again["b"])] == [4, 2]
    assert batches == ([2, 2, 1, 1] if kv_cache_dtype is None else [-1, -1, -1, -1])


def test_proposer_guesses_are_the_same_with_and_without_the_native_round() -> None:
    prompts = [list(range(5, 305)), [0, 41, 17, 99, 230] * 9, list(range(1000, 1100, 3))]
    guesses = []
    for native in (True, False):
        runner = ModelRunner(DEMO_DRAFT, block_size=16, num_kv_blocks=128)
        proposer = DraftModelProposer(runner)
        lean = proposer._forward.__self__  # type: ignore[attr-defined]
        if lean._round is None:
            pytest.skip("the native CPU kernels did not build here")
        if not native:
            lean._round = None
        first = proposer.propose([ProposalRequest(f"r{i}", p, 6) for i, p in enumerate(prompts)])
        moved = [p + first[f"r{i}"][:2] + [7] for i, p in enumerate(prompts)]  # two accepted, one corrected
        again = proposer.propose([ProposalRequest(f"r{i}", p, 5) for i, p in enumerate(moved)])
        guesses.append((first, again))
    assert guesses[0] == guesses[1]


def test_a_position_past_its_block_table_or_a_token_past_the_vocabulary_is_refused_not_read(
        tiny_dir: Path) -> None:
    runner, lean = lean_for(tiny_dir, block_size=4)
    tables = torch.tensor([[3, 4]], dtype=torch.int32)  # positions 0-7
    assert lean.decode_hidden(torch.tensor([1]), runner.kv_caches, torch.tensor([7]), tables) is not None
    with pytest.raises(ValueError, match="block table"):
        lean.decode_hidden(torch.tensor([1]), runner.kv_caches, torch.tensor([8]), tables)
    with pytest.raises(ValueError, match="vocabulary"):
        lean.decode_hidden(torch.tensor([runner.config.vocab_size]), runner.kv_caches, torch.tensor([7]), tables)
