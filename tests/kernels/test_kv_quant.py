"""Quantized KV caches (kernels/ops/kv_quant.py): the formats, write_kv, and the native decode
kernel and the reference decode/prefill reading codes, against attention over the float rows."""

from __future__ import annotations

import pytest
import torch

from fairgate.kernels.ops import cpu_attention, reference
from fairgate.kernels.ops.kv_quant import cache_shape, dequantize_rows, quantize_rows
from tests.kernels.paged_inputs import random_paged_kv

CPU = torch.device("cpu")
needs_native = pytest.mark.skipif(cpu_attention.library() is None, reason="no C compiler here")


def _quantized(lens, num_kv_heads, head_dim, block_size, fmt, seed):
    """A shuffled paged cache (float rows) and its codes and scales."""
    gen = torch.Generator().manual_seed(seed)
    kv = random_paged_kv(lens, num_kv_heads, head_dim, block_size, torch.float32, CPU, gen)
    dtype, _, _ = cache_shape(fmt, head_dim)
    (kc, ks), (vc, vs) = quantize_rows(kv.k_cache, dtype), quantize_rows(kv.v_cache, dtype)
    return kv, kc, ks, vc, vs, gen


def test_int8_rows_are_symmetric_per_token_and_head() -> None:
    x = torch.tensor([[[1.0, -2.0, 0.5, 0.0], [0.25, 0.0, 0.0, -0.125]]])  # [T=1, Hkv=2, D=4]
    codes, scales = quantize_rows(x, torch.int8)
    assert codes.dtype == torch.int8 and scales.dtype == torch.float16 and scales.shape == (1, 2, 1)
    assert codes[0, 0].tolist() == [64, -127, 32, 0] and codes[0, 1, 0].item() == 127
    assert (dequantize_rows(codes, scales) - x).abs().max() <= 2 / 127 / 2 + 1e-3


def test_int4_rows_pack_a_chunk_low_then_high_nibbles() -> None:
    x = torch.arange(32, dtype=torch.float32).view(1, 1, 32)  # one row, codes 0..15 twice over
    codes, scales = quantize_rows(x, torch.uint8)
    assert codes.shape == (1, 1, 16) and scales.shape == (1, 1, 2)
    # chunk 0 (elements 0..15): byte j = element j | element j + 8 << 4
    q = torch.round((x[0, 0] - scales[0, 0, 1].float()) / scales[0, 0, 0].float()).to(torch.int64)
    assert codes[0, 0, 3].item() == int(q[3]) | (int(q[11]) << 4)
    assert codes[0, 0, 8].item() == int(q[16]) | (int(q[24]) << 4)
    torch.testing.assert_close(dequantize_rows(codes, scales), x, atol=float(scales[0, 0, 0]) / 2 + 0.05, rtol=0)
    with pytest.raises(ValueError):
        cache_shape("int4", 24)


@pytest.mark.parametrize("fmt", ["int8", "int4"])
def test_write_kv_fills_codes_and_scales_of_its_slots_only(fmt: str) -> None:
    dtype, width, per_row = cache_shape(fmt, 32)
    k_cache, v_cache = torch.zeros(4, 8, 2, width, dtype=dtype), torch.zeros(4, 8, 2, width, dtype=dtype)
    k_scale, v_scale = torch.zeros(4, 8, 2, per_row, dtype=torch.float16), torch.zeros(4, 8, 2, per_row, dtype=torch.float16)
    key, value = torch.randn(3, 2, 32), torch.randn(3, 2, 32)
    slots = torch.tensor([5, 17, 30])
    reference.write_kv(key, value, k_cache, v_cache, slots, k_scale, v_scale)
    rows = dequantize_rows(k_cache.view(-1, 2, width)[slots], k_scale.view(-1, 2, per_row)[slots])
    torch.testing.assert_close(rows, key, atol=0.2 if fmt == "int4" else 0.02, rtol=0)
    untouched = torch.ones(32, dtype=torch.bool)
    untouched[slots] = False
    assert not k_scale.view(-1, 2, per_row)[untouched].any() and not v_cache.view(-1, 2, width)[untouched].any()


@needs_native
@pytest.mark.parametrize("fmt", ["int8", "int4"])
@pytest.mark.parametrize(("block_size", "head_dim", "group", "num_kv_heads"),
                         [(16, 64, 1, 2), (16, 128, 4, 2), (8, 16, 2, 3), (32, 64, 8, 1), (16, 48, 3, 2), (1, 32, 2, 2)])
@pytest.mark.parametrize("lens", [[1], [17, 5, 64], [33, 1, 2, 100]])
def test_native_decode_on_codes_matches_the_reference(fmt, block_size, head_dim, group, num_kv_heads, lens) -> None:
    if fmt == "int4" and head_dim % 16:
        pytest.skip("4-bit rows need head_dim % 16 == 0")
    kv, kc, ks, vc, vs, gen = _quantized(lens, num_kv_heads, head_dim, block_size, fmt, seed=len(lens) + head_dim)
    q = torch.randn(len(lens), num_kv_heads * group, head_dim, generator=gen)
    args = (kv.block_tables, kv.seq_lens, head_dim**-0.5)
    native = cpu_attention.paged_decode_attention(q, kc, vc, *args, None, ks, vs)
    ref = reference.paged_decode_attention(q, kc, vc, *args, None, ks, vs)
    on_floats = reference.paged_decode_attention(q, dequantize_rows(kc, ks), dequantize_rows(vc, vs), *args)
    torch.testing.assert_close(native, ref, atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(ref, on_floats, atol=2e-5, rtol=1e-4)
    # and the quantization itself stays near the float cache
    exact = reference.paged_decode_attention(q, kv.k_cache, kv.v_cache, *args)
    assert (native - exact).abs().max() < (0.35 if fmt == "int4" else 0.05)


@needs_native
def test_native_refuses_codes_without_their_scales() -> None:
    kv, kc, ks, vc, vs, gen = _quantized([5], 2, 32, 16, "int8", seed=2)
    q = torch.randn(1, 2, 32, generator=gen)
    with pytest.raises(ValueError):
        cpu_attention.paged_decode_attention(q, kc, vc, kv.block_tables, kv.seq_lens, 0.1)
    with pytest.raises(ValueError):
        cpu_attention.paged_decode_attention(q, kc, vc, kv.block_tables, kv.seq_lens, 0.1, None, ks[..., :0], vs)


@pytest.mark.parametrize("fmt", ["int8", "int4"])
def test_reference_prefill_on_codes_matches_prefill_on_their_floats(fmt: str) -> None:
    lens, q_lens = [20, 9, 40], [20, 3, 7]  # one full prompt, two chunks after a cached prefix
    kv, kc, ks, vc, vs, gen = _quantized(lens, 2, 32, 8, fmt, seed=5)
    q = torch.randn(sum(q_lens), 4, 32, generator=gen)
    starts = torch.tensor([0, 20, 23, 30], dtype=torch.int32)
    args = (kv.block_tables, starts, kv.seq_lens, 32**-0.5)
    got = reference.paged_prefill_attention(q, kc, vc, *args, ks, vs)
    want = reference.paged_prefill_attention(q, dequantize_rows(kc, ks), dequantize_rows(vc, vs), *args)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
