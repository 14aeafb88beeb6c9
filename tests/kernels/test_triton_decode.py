"""Triton paged decode attention against the torch reference (interpreter on CPU)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fairgate.kernels.ops import reference
from tests.kernels.paged_inputs import assert_close, random_paged_kv

pytest.importorskip("triton")
from fairgate.kernels.triton.decode import decode_attention, paged_decode_attention  # noqa: E402

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _query(num_seqs: int, num_heads: int, head_dim: int, dtype, device, gen) -> torch.Tensor:
    return torch.randn(num_seqs, num_heads, head_dim, generator=gen).to(dtype).to(device)


@pytest.mark.parametrize(
    ("block_size", "head_dim", "group", "dtype", "num_splits"),
    [
        (16, 64, 1, torch.float32, 1),
        (16, 128, 4, torch.float16, 3),
        (32, 64, 8, torch.bfloat16, 2),
        (32, 128, 1, torch.bfloat16, 1),
        (16, 64, 8, torch.float32, 4),
        (32, 128, 4, torch.float32, None),  # automatic choice
    ],
)
def test_decode_matches_reference(block_size, head_dim, group, dtype, num_splits, device):
    gen = torch.Generator().manual_seed(block_size * head_dim + group)
    num_kv_heads = 2
    # single-token context, a context ending mid-block, one ending exactly on a block boundary
    lens = [1, 2 * block_size + 5, 3 * block_size]
    kv = random_paged_kv(lens, num_kv_heads, head_dim, block_size, dtype, device, gen)
    q = _query(len(lens), num_kv_heads * group, head_dim, dtype, device, gen)
    scale = head_dim**-0.5
    out = decode_attention(q, kv.k_cache, kv.v_cache, kv.block_tables, kv.seq_lens, scale,
                           num_splits=num_splits, block_n=16)
    expected = reference.paged_decode_attention(
        q, kv.k_cache, kv.v_cache, kv.block_tables, kv.seq_lens, scale
    )
    assert_close(out, expected)


@settings(max_examples=6, deadline=None)
@given(
    block_size=st.sampled_from([16, 32]),
    head_dim=st.sampled_from([64, 128]),
    group=st.sampled_from([1, 4, 8]),
    dtype=st.sampled_from(DTYPES),
    lens=st.lists(st.integers(1, 90), min_size=1, max_size=3),
    num_splits=st.integers(1, 4),
    seed=st.integers(0, 2**16),
)
def test_decode_random_shapes(block_size, head_dim, group, dtype, lens, num_splits, seed):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    gen = torch.Generator().manual_seed(seed)
    kv = random_paged_kv(lens, 1, head_dim, block_size, dtype, device, gen)
    q = _query(len(lens), group, head_dim, dtype, device, gen)
    out = decode_attention(q, kv.k_cache, kv.v_cache, kv.block_tables, kv.seq_lens, 0.1,
                           max_seq_len=max(lens), num_splits=num_splits, block_n=32)
    expected = reference.paged_decode_attention(
        q, kv.k_cache, kv.v_cache, kv.block_tables, kv.seq_lens, 0.1
    )
    assert_close(out, expected)


def test_decode_default_tiles_and_strided_query(device):
    """The public signature with default tiles; q as a strided view of a fused qkv row."""
    gen = torch.Generator().manual_seed(7)
    num_heads, num_kv_heads, head_dim, block_size = 8, 2, 64, 16
    lens = [70, 9]
    kv = random_paged_kv(lens, num_kv_heads, head_dim, block_size, torch.float16, device, gen)
    qkv = torch.randn(2, (num_heads + 2 * num_kv_heads) * head_dim, generator=gen)
    qkv = qkv.to(torch.float16).to(device)
    q = qkv[:, : num_heads * head_dim].view(2, num_heads, head_dim)  # token stride > H * D
    out = paged_decode_attention(q, kv.k_cache, kv.v_cache, kv.block_tables, kv.seq_lens, 0.125)
    expected = reference.paged_decode_attention(
        q, kv.k_cache, kv.v_cache, kv.block_tables, kv.seq_lens, 0.125
    )
    assert_close(out, expected)


def test_decode_short_sequence_with_empty_splits(device):
    """A context shorter than num_splits tiles leaves empty splits: they must weigh 0, not NaN."""
    gen = torch.Generator().manual_seed(3)
    lens = [1, 100]
    kv = random_paged_kv(lens, 1, 64, 16, torch.float32, device, gen)
    q = _query(2, 4, 64, torch.float32, device, gen)
    out = decode_attention(q, kv.k_cache, kv.v_cache, kv.block_tables, kv.seq_lens, 0.125,
                           num_splits=4, block_n=16)
    # With a single key the output is exactly that key's value row, for every head.
    block = int(kv.block_tables[0, 0])
    torch.testing.assert_close(out[0], kv.v_cache[block, 0, 0].expand(4, 64))
    assert torch.isfinite(out).all()


def test_decode_empty_batch(device):
    gen = torch.Generator().manual_seed(0)
    kv = random_paged_kv([5], 2, 64, 16, torch.float32, device, gen)
    q = torch.empty(0, 4, 64, device=device)
    empty_tables = kv.block_tables[:0]
    out = paged_decode_attention(q, kv.k_cache, kv.v_cache, empty_tables, kv.seq_lens[:0], 0.1, 0)
    assert out.shape == (0, 4, 64)
