"""Triton KV-cache write against the torch reference: a copy, so results must be identical."""

from __future__ import annotations

import pytest
import torch

from fairgate.kernels.ops import reference

pytest.importorskip("triton")
from fairgate.kernels.triton.cache import write_kv  # noqa: E402


def _run_both(key, value, k_cache, v_cache, slots):
    expected = (k_cache.clone(), v_cache.clone())
    reference.write_kv(key, value, *expected, slots)
    write_kv(key, value, k_cache, v_cache, slots)
    # Whole caches compared: untouched slots must keep their old contents too.
    if key.dtype == k_cache.dtype or k_cache.is_cuda:
        assert torch.equal(k_cache, expected[0])
        assert torch.equal(v_cache, expected[1])
    else:
        # The interpreter truncates fp32 -> bf16 where CUDA (and torch) round to nearest even:
        # allow one bf16 ulp there, and only there.
        torch.testing.assert_close(k_cache, expected[0], atol=0, rtol=2**-7)
        torch.testing.assert_close(v_cache, expected[1], atol=0, rtol=2**-7)


@pytest.mark.parametrize(
    ("block_size", "num_kv_heads", "head_dim", "dtype"),
    [
        (16, 2, 64, torch.float32),
        (32, 1, 128, torch.float16),
        (16, 8, 128, torch.bfloat16),
        (32, 3, 64, torch.float32),  # non-power-of-two head count: masked lanes
    ],
)
def test_write_kv_matches_reference(block_size, num_kv_heads, head_dim, dtype, device):
    gen = torch.Generator().manual_seed(block_size + num_kv_heads)
    num_blocks = 6
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    k_cache = torch.randn(shape, generator=gen).to(dtype).to(device)
    v_cache = torch.randn(shape, generator=gen).to(dtype).to(device)
    # scattered slots: first and last slot of the pool, both ends of a block, a mid-block one
    slots = [0, num_blocks * block_size - 1, 2 * block_size, 3 * block_size - 1, block_size + 5]
    key = torch.randn(len(slots), num_kv_heads, head_dim, generator=gen).to(dtype).to(device)
    value = torch.randn(len(slots), num_kv_heads, head_dim, generator=gen).to(dtype).to(device)
    _run_both(key, value, k_cache, v_cache, torch.tensor(slots, device=device))


def test_write_kv_strided_views_and_dtype_cast(device):
    """K/V as views into a fused qkv projection (fp32), written into a bf16 cache."""
    gen = torch.Generator().manual_seed(11)
    num_tokens, heads, kv_heads, head_dim = 4, 4, 2, 64
    qkv = torch.randn(num_tokens, (heads + 2 * kv_heads) * head_dim, generator=gen).to(device)
    k = qkv[:, heads * head_dim : (heads + kv_heads) * head_dim].view(num_tokens, kv_heads, head_dim)
    v = qkv[:, (heads + kv_heads) * head_dim :].view(num_tokens, kv_heads, head_dim)
    cache = torch.zeros(2, 3, 16, kv_heads, head_dim, dtype=torch.bfloat16, device=device)
    _run_both(k, v, cache[0], cache[1], torch.tensor([17, 3, 40, 0], device=device))


def test_write_kv_no_tokens_is_a_no_op(device):
    k_cache = torch.randn(2, 16, 2, 64, device=device)
    v_cache = torch.randn(2, 16, 2, 64, device=device)
    empty = torch.empty(0, 2, 64, device=device)
    _run_both(empty, empty, k_cache, v_cache, torch.empty(0, dtype=torch.int64, device=device))
