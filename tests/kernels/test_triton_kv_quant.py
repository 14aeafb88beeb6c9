"""Triton kernels on quantized KV caches (kernels/ops/kv_quant.py) against the torch reference:
write_kv's codes and scales bit for bit, decode and prefill reading codes in place."""

from __future__ import annotations

import pytest
import torch

from fairgate.kernels.ops import reference
from fairgate.kernels.ops.kv_quant import cache_shape, quantize_rows
from tests.kernels.paged_inputs import random_paged_kv

pytest.importorskip("triton")
from fairgate.kernels.triton.cache import write_kv  # noqa: E402
from fairgate.kernels.triton.decode import decode_attention  # noqa: E402
from fairgate.kernels.triton.prefill import prefill_attention  # noqa: E402


@pytest.mark.parametrize("fmt", ["int8", "int4"])
@pytest.mark.parametrize(("block_size", "num_kv_heads", "head_dim"), [(16, 2, 64), (8, 3, 32), (4, 1, 16)])
def test_write_kv_codes_and_scales_equal_the_reference(fmt, block_size, num_kv_heads, head_dim, device) -> None:
    gen = torch.Generator().manual_seed(block_size * num_kv_heads)
    dtype, width, per_row = cache_shape(fmt, head_dim)
    shape = (5, block_size, num_kv_heads)
    caches = [torch.zeros(*shape, width, dtype=dtype, device=device) for _ in range(4)]
    scales = [torch.zeros(*shape, per_row, dtype=torch.float16, device=device) for _ in range(4)]
    n = 7
    key = torch.randn(n, num_kv_heads, head_dim, generator=gen).to(device)
    value = (3 * torch.randn(n, num_kv_heads, head_dim, generator=gen)).to(device)
    slots = torch.randperm(5 * block_size, generator=gen)[:n].to(device)
    reference.write_kv(key, value, caches[0], caches[1], slots, scales[0], scales[1])
    write_kv(key, value, caches[2], caches[3], slots, scales[2], scales[3])
    for a, b in ((caches[0], caches[2]), (caches[1], caches[3]), (scales[0], scales[2]), (scales[1], scales[3])):
        assert torch.equal(a, b)


def _quantized_case(lens, num_kv_heads, head_dim, block_size, fmt, device, seed):
    gen = torch.Generator().manual_seed(seed)
    kv = random_paged_kv(lens, num_kv_heads, head_dim, block_size, torch.float32, torch.device("cpu"), gen)
    dtype, _, _ = cache_shape(fmt, head_dim)
    (kc, ks), (vc, vs) = quantize_rows(kv.k_cache, dtype), quantize_rows(kv.v_cache, dtype)
    return [t.to(device) for t in (kc, ks, vc, vs, kv.block_tables, kv.seq_lens)], gen


@pytest.mark.parametrize("fmt", ["int8", "int4"])
@pytest.mark.parametrize(("block_size", "head_dim", "group", "num_kv_heads", "splits"),
                         [(16, 64, 1, 2, 1), (16, 32, 4, 2, 3), (8, 16, 2, 1, 2), (16, 48, 3, 2, 1)])
def test_decode_on_codes_matches_the_reference(fmt, block_size, head_dim, group, num_kv_heads, splits, device) -> None:
    if fmt == "int4" and head_dim % 16:
        pytest.skip("4-bit rows need head_dim % 16 == 0")
    lens = [1, 19, 70]
    (kc, ks, vc, vs, tables, seq_lens), gen = _quantized_case(lens, num_kv_heads, head_dim, block_size, fmt,
                                                              device, seed=head_dim + group)
    q = torch.randn(len(lens), num_kv_heads * group, head_dim, generator=gen).to(device)
    got = decode_attention(q, kc, vc, tables, seq_lens, 0.125, num_splits=splits, block_n=16,
                           k_scale=ks, v_scale=vs)
    want = reference.paged_decode_attention(q.cpu(), kc.cpu(), vc.cpu(), tables.cpu(), seq_lens.cpu(), 0.125,
                                            None, ks.cpu(), vs.cpu())
    torch.testing.assert_close(got.cpu(), want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("fmt", ["int8", "int4"])
@pytest.mark.parametrize(("block_size", "head_dim", "group"), [(16, 32, 2), (8, 16, 1)])
def test_prefill_on_codes_matches_the_reference(fmt, block_size, head_dim, group, device) -> None:
    lens, q_lens = [20, 9, 40], [20, 3, 7]
    (kc, ks, vc, vs, tables, seq_lens), gen = _quantized_case(lens, 2, head_dim, block_size, fmt, device, seed=9)
    q = torch.randn(sum(q_lens), 2 * group, head_dim, generator=gen).to(device)
    starts = torch.tensor([0, 20, 23, 30], dtype=torch.int32, device=device)
    got = prefill_attention(q, kc, vc, tables, starts, seq_lens, 0.2, block_m=16, block_n=16,
                            k_scale=ks, v_scale=vs)
    want = reference.paged_prefill_attention(q.cpu(), kc.cpu(), vc.cpu(), tables.cpu(), starts.cpu(),
                                             seq_lens.cpu(), 0.2, ks.cpu(), vs.cpu())
    torch.testing.assert_close(got.cpu(), want, atol=1e-4, rtol=1e-4)


def test_codes_without_scales_are_refused(device) -> None:
    (kc, ks, vc, vs, tables, seq_lens), gen = _quantized_case([5], 1, 16, 8, "int8", device, seed=1)
    q = torch.randn(1, 1, 16, generator=gen).to(device)
    with pytest.raises(ValueError, match="scales"):
        decode_attention(q, kc, vc, tables, seq_lens, 0.1)
