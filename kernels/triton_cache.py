"""Triton kernel that writes new tokens' K and V into their paged-cache slots.

Same contract as `kernels.reference.write_kv`. One program per token moves all of that token's
KV heads at once: a token's heads are adjacent in the cache ([..., num_kv_heads, head_dim]), so
each program writes one contiguous run of num_kv_heads * head_dim elements per cache.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.triton_common import check_device


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


def _last_dim_contiguous(t: torch.Tensor) -> torch.Tensor:
    # The kernels index the head dim with stride 1; anything else gets one copy.
    return t if t.stride(-1) == 1 else t.contiguous()


def write_kv(
    key: torch.Tensor,  # [num_tokens, num_kv_heads, head_dim]
    value: torch.Tensor,  # [num_tokens, num_kv_heads, head_dim]
    k_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_dim]
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,  # [num_tokens] int64, slot = block_id * block_size + offset
) -> None:
    """Store each token's K and V in its slot, in place. See `kernels.reference.write_kv`."""
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
