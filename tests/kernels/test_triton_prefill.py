"""Triton paged prefill / chunked-prefill attention against the torch reference."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fairgate.kernels.ops import reference
from tests.kernels.paged_inputs import assert_close, random_paged_kv

pytest.importorskip("triton")
from fairgate.kernels.triton.prefill import paged_prefill_attention, prefill_attention  # noqa: E402


def _inputs(q_lens: list[int], ctx_lens: list[int], num_heads: int, num_kv_heads: int,
            head_dim: int, block_size: int, dtype, device, seed: int):
    gen = torch.Generator().manual_seed(seed)
    kv = random_paged_kv(ctx_lens, num_kv_heads, head_dim, block_size, dtype, device, gen)
    starts = torch.tensor([0, *torch.tensor(q_lens).cumsum(0).tolist()], dtype=torch.int32)
    q = torch.randn(sum(q_lens), num_heads, head_dim, generator=gen).to(dtype).to(device)
    return q, kv, starts.to(device)


def _check(q, kv, starts, **tiles) -> None:
    scale = q.shape[-1] ** -0.5
    if tiles:
        out = prefill_attention(q, kv.k_cache, kv.v_cache, kv.block_tables, starts, kv.seq_lens,
                                scale, **tiles)
    else:
        out = paged_prefill_attention(q, kv.k_cache, kv.v_cache, kv.block_tables, starts,
                                      kv.seq_lens, scale)
    expected = reference.paged_prefill_attention(
        q, kv.k_cache, kv.v_cache, kv.block_tables, starts, kv.seq_lens, scale
    )
    assert_close(out, expected)


# (new tokens, context length incl. them): a whole prompt, a chunk after a cached prefix that
# ends mid-block, a single new token (decode as prefill), a chunk longer than one tile.
MIXED = ([7, 5, 1, 20], [7, 37, 50, 20])


@pytest.mark.parametrize(
    ("block_size", "head_dim", "group", "dtype"),
    [
        (16, 64, 1, torch.float32),
        (32, 128, 4, torch.float16),
        (16, 128, 8, torch.bfloat16),
        (32, 64, 4, torch.float32),
    ],
)
def test_prefill_matches_reference(block_size, head_dim, group, dtype, device):
    q, kv, starts = _inputs(*MIXED, 2 * group, 2, head_dim, block_size, dtype, device, seed=group)
    _check(q, kv, starts, block_m=16, block_n=16)


def test_prefill_default_tiles_public_signature(device):
    q, kv, starts = _inputs(*MIXED, 8, 2, 64, 16, torch.bfloat16, device, seed=5)
    _check(q, kv, starts)


def test_prefill_skips_sequences_without_new_tokens(device):
    """A sequence with zero new tokens contributes no rows and must not disturb the others."""
    q, kv, starts = _inputs([3, 0, 4], [3, 9, 20], 4, 1, 64, 16, torch.float32, device, seed=9)
    _check(q, kv, starts, block_m=16, block_n=16)


def test_prefill_empty_batch(device):
    q, kv, _ = _inputs([2], [2], 4, 2, 64, 16, torch.float32, device, seed=1)
    starts = torch.zeros(1, dtype=torch.int32, device=device)
    out = paged_prefill_attention(q[:0], kv.k_cache, kv.v_cache, kv.block_tables[:0], starts,
                                  kv.seq_lens[:0], 0.1)
    assert out.shape == (0, 4, 64)


@settings(max_examples=5, deadline=None)
@given(
    block_size=st.sampled_from([16, 32]),
    head_dim=st.sampled_from([64, 128]),
    group=st.sampled_from([1, 4, 8]),
    dtype=st.sampled_from([torch.float32, torch.float16, torch.bfloat16]),
    chunks=st.lists(st.tuples(st.integers(1, 24), st.integers(0, 40)), min_size=1, max_size=3),
    seed=st.integers(0, 2**16),
)
def test_prefill_random_shapes(block_size, head_dim, group, dtype, chunks, seed):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    q_lens = [n for n, _ in chunks]
    ctx_lens = [n + cached for n, cached in chunks]
    q, kv, starts = _inputs(q_lens, ctx_lens, group, 1, head_dim, block_size, dtype, device, seed)
    _check(q, kv, starts, block_m=16, block_n=32)
