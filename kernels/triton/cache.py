"""Triton kernel that writes new tokens' K and V into their paged-cache slots.

Same contract as `kernels.ops.reference.write_kv`. One program per token moves all of that token's
KV heads at once: a token's heads are adjacent in the cache ([..., num_kv_heads, head_dim]), so
each program writes one contiguous run of num_kv_heads * head_dim elements per cache. A
quantized cache (kernels/ops/kv_quant.py) gets each (token, head) row's codes and float16 scales,
computed in registers from the row with the same float32 steps as `kv_quant.quantize_rows`.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fairgate.kernels.triton.common import check_device, kv_quant_args


@triton.jit
def _write_kv_kernel(
    key_ptr, value_ptr, k_cache_ptr, v_cache_ptr, slot_ptr,
    stride_key_t, stride_key_h,  # key: [num_tokens, num_kv_heads, head_dim], dim stride 1
    stride_value_t, stride_value_h,
    stride_kc_b, stride_kc_t, stride_kc_h,  # k_cache: [num_blocks, block_size, Hkv, D]
    stride_vc_b, stride_vc_t, stride_vc_h,
    NUM_KV_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_SIZE: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr,
):
    token = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_ptr + token).to(tl.int64)
    block = slot // BLOCK_SIZE
    offset = slot % BLOCK_SIZE

    offs_h = tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, BLOCK_D)
    mask = (offs_h[:, None] < NUM_KV_HEADS) & (offs_d[None, :] < HEAD_DIM)  # [BH, BD]

    src_k = key_ptr + token * stride_key_t + offs_h[:, None] * stride_key_h + offs_d[None, :]
    src_v = value_ptr + token * stride_value_t + offs_h[:, None] * stride_value_h + offs_d[None, :]
    k = tl.load(src_k, mask=mask)
    v = tl.load(src_v, mask=mask)

    dst_k = (k_cache_ptr + block * stride_kc_b + offset * stride_kc_t
             + offs_h[:, None] * stride_kc_h + offs_d[None, :])
    dst_v = (v_cache_ptr + block * stride_vc_b + offset * stride_vc_t
             + offs_h[:, None] * stride_vc_h + offs_d[None, :])
    tl.store(dst_k, k.to(k_cache_ptr.dtype.element_ty), mask=mask)
    tl.store(dst_v, v.to(v_cache_ptr.dtype.element_ty), mask=mask)


_ROUND = 12582912.0  # 1.5 * 2**23: (v + _ROUND) - _ROUND rounds |v| < 2**22 half to even, as torch.round
_TINY = 5.960464477539063e-08  # 2**-24, the smallest scale (kv_quant.quantize_rows)


@triton.jit
def _quantize_int8(src, dst, scale_dst, offs_h, offs_d, mask_h, mask_d):
    """One token's rows [BH, BD] from src (pointers) as int8 codes at dst, scales at scale_dst [BH]."""
    mask = mask_h[:, None] & mask_d[None, :]
    x = tl.load(src + offs_d[None, :], mask=mask, other=0.0).to(tl.float32)
    scale = (tl.max(tl.abs(x), axis=1) / 127.0).to(tl.float16).to(tl.float32)
    scale = tl.maximum(scale, _TINY)
    codes = (x / scale[:, None] + _ROUND) - _ROUND
    codes = tl.minimum(tl.maximum(codes, -127.0), 127.0)
    tl.store(dst + offs_d[None, :], codes.to(tl.int8), mask=mask)
    tl.store(scale_dst, scale.to(tl.float16), mask=mask_h)


@triton.jit
def _quantize_int4(src, dst, scale_dst, offs_h, offs_b, mask_h, mask_b):
    """One token's rows as 4-bit codes: byte b of a row holds element (b // 8) * 16 + b % 8 in
    its low nibble and the element 8 further in its high one; scale and min at scale_dst [BH]."""
    mask = mask_h[:, None] & mask_b[None, :]
    d_lo = (offs_b // 8) * 16 + offs_b % 8
    x_lo = tl.load(src + d_lo[None, :], mask=mask, other=0.0).to(tl.float32)  # [BH, BB]
    x_hi = tl.load(src + d_lo[None, :] + 8, mask=mask, other=0.0).to(tl.float32)
    lo = tl.minimum(tl.min(tl.where(mask, x_lo, float("inf")), axis=1),
                    tl.min(tl.where(mask, x_hi, float("inf")), axis=1)).to(tl.float16).to(tl.float32)
    hi = tl.maximum(tl.max(tl.where(mask, x_lo, float("-inf")), axis=1),
                    tl.max(tl.where(mask, x_hi, float("-inf")), axis=1))
    scale = tl.maximum(((hi - lo) / 15.0).to(tl.float16).to(tl.float32), _TINY)
    c_lo = (x_lo - lo[:, None]) / scale[:, None] + _ROUND - _ROUND
    c_hi = (x_hi - lo[:, None]) / scale[:, None] + _ROUND - _ROUND
    c_lo = tl.minimum(tl.maximum(c_lo, 0.0), 15.0).to(tl.int32)
    c_hi = tl.minimum(tl.maximum(c_hi, 0.0), 15.0).to(tl.int32)
    tl.store(dst + offs_b[None, :], (c_lo | (c_hi << 4)).to(tl.uint8), mask=mask)
    tl.store(scale_dst, scale.to(tl.float16), mask=mask_h)
    tl.store(scale_dst + 1, lo.to(tl.float16), mask=mask_h)


@triton.jit
def _write_kv_quant_kernel(
    key_ptr, value_ptr, k_cache_ptr, v_cache_ptr, slot_ptr, k_scale_ptr, v_scale_ptr,
    stride_key_t, stride_key_h, stride_value_t, stride_value_h,
    stride_kc_b, stride_kc_t, stride_kc_h, stride_vc_b, stride_vc_t, stride_vc_h,
    stride_ks_b, stride_ks_t, stride_ks_h, stride_vs_b, stride_vs_t, stride_vs_h,
    NUM_KV_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_SIZE: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr, KV_QUANT: tl.constexpr,
):
    token = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_ptr + token).to(tl.int64)
    block = slot // BLOCK_SIZE
    offset = slot % BLOCK_SIZE
    offs_h = tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, BLOCK_D)  # elements (int8) or bytes (4-bit: BLOCK_D covers HEAD_DIM / 2)
    mask_h = offs_h < NUM_KV_HEADS
    src_k = key_ptr + token * stride_key_t + offs_h[:, None] * stride_key_h
    src_v = value_ptr + token * stride_value_t + offs_h[:, None] * stride_value_h
    dst_k = k_cache_ptr + block * stride_kc_b + offset * stride_kc_t + offs_h[:, None] * stride_kc_h
    dst_v = v_cache_ptr + block * stride_vc_b + offset * stride_vc_t + offs_h[:, None] * stride_vc_h
    sk = k_scale_ptr + block * stride_ks_b + offset * stride_ks_t + offs_h * stride_ks_h
    sv = v_scale_ptr + block * stride_vs_b + offset * stride_vs_t + offs_h * stride_vs_h
    if KV_QUANT == 1:
        mask_d = offs_d < HEAD_DIM
        _quantize_int8(src_k, dst_k, sk, offs_h, offs_d, mask_h, mask_d)
        _quantize_int8(src_v, dst_v, sv, offs_h, offs_d, mask_h, mask_d)
    else:
        mask_b = offs_d < HEAD_DIM // 2
        _quantize_int4(src_k, dst_k, sk, offs_h, offs_d, mask_h, mask_b)
        _quantize_int4(src_v, dst_v, sv, offs_h, offs_d, mask_h, mask_b)


def _last_dim_contiguous(t: torch.Tensor) -> torch.Tensor:
    # The kernels index the head dim with stride 1; anything else gets one copy.
    return t if t.stride(-1) == 1 else t.contiguous()


def write_kv(
    key: torch.Tensor,  # [num_tokens, num_kv_heads, head_dim]
    value: torch.Tensor,  # [num_tokens, num_kv_heads, head_dim]
    k_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_dim]
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,  # [num_tokens] int64, slot = block_id * block_size + offset
    k_scale: torch.Tensor | None = None,  # quantized caches: [num_blocks, block_size, Hkv, 1 | 2]
    v_scale: torch.Tensor | None = None,
) -> None:
    """Store each token's K and V in its slot, in place. See `kernels.ops.reference.write_kv`."""
    check_device(key, _write_kv_kernel)
    num_tokens = key.shape[0]
    if num_tokens == 0:
        return
    _, block_size, num_kv_heads, head_dim = k_cache.shape
    if k_cache.stride(-1) != 1 or v_cache.stride(-1) != 1:
        raise ValueError("k_cache and v_cache must have a contiguous head_dim")
    key = _last_dim_contiguous(key)
    value = _last_dim_contiguous(value)
    slot_mapping = slot_mapping.contiguous()
    kv_quant, k_scale, *ks_strides = kv_quant_args(k_cache, k_scale)
    if kv_quant:
        _, v_scale, *vs_strides = kv_quant_args(v_cache, v_scale)
        head_dim = key.shape[-1]
        width = head_dim if kv_quant == 1 else head_dim // 2
        _write_kv_quant_kernel[(num_tokens,)](
            key, value, k_cache, v_cache, slot_mapping, k_scale, v_scale,
            key.stride(0), key.stride(1), value.stride(0), value.stride(1),
            k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
            v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), *ks_strides, *vs_strides,
            NUM_KV_HEADS=num_kv_heads, HEAD_DIM=head_dim, BLOCK_SIZE=block_size,
            BLOCK_H=triton.next_power_of_2(num_kv_heads), BLOCK_D=triton.next_power_of_2(width),
            KV_QUANT=kv_quant, num_warps=1,
        )
        return
    _write_kv_kernel[(num_tokens,)](
        key, value, k_cache, v_cache, slot_mapping,
        key.stride(0), key.stride(1),
        value.stride(0), value.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        NUM_KV_HEADS=num_kv_heads, HEAD_DIM=head_dim, BLOCK_SIZE=block_size,
        BLOCK_H=triton.next_power_of_2(num_kv_heads), BLOCK_D=triton.next_power_of_2(head_dim),
        num_warps=4 if num_kv_heads * head_dim >= 1024 else 1,
    )
