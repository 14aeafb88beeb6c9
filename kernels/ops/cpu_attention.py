"""Paged decode and prefill attention on the native CPU kernel (native/cpu_attention.c), on torch
tensors' memory; the same contracts as `kernels.ops.reference`, which takes what the kernel does not.
"""

from __future__ import annotations

import ctypes

import torch

from fairgate.kernels.native import abi
from fairgate.kernels.native.abi import LANES
from fairgate.kernels.ops import reference


def library() -> ctypes.CDLL | None:
    """The attention library (native/cpu_attention.c), or None where it cannot be built here."""
    return abi.load(abi.ATTENTION)


KV_DTYPE_CODES = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2, torch.int8: 3, torch.uint8: 4}


def paged_decode_attention(
    query: torch.Tensor,  # [num_seqs, num_heads, head_dim]
    k_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_dim]
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,  # [num_seqs, max_blocks] int32
    seq_lens: torch.Tensor,  # [num_seqs] int32, >= 1
    scale: float,
    max_seq_len: int | None = None,
    k_scale: torch.Tensor | None = None,  # [num_blocks, block_size, num_kv_heads, 1 | 2] float16
    v_scale: torch.Tensor | None = None,
    window: int | None = None,
) -> torch.Tensor:  # [num_seqs, num_heads, head_dim]
    """Same contract as `kernels.ops.reference.paged_decode_attention`; the library must load."""
    num_seqs, num_heads, head_dim = query.shape
    if num_seqs == 0:
        return query.new_empty(query.shape)
    if head_dim % LANES:  # the kernel works in 16-lane vectors; odd sizes take the torch path
        return reference.paged_decode_attention(query, k_cache, v_cache, block_tables, seq_lens, scale,
                                                max_seq_len, k_scale, v_scale, window)
    lib = library()
    if lib is None:
        raise RuntimeError("native CPU kernels are not available")
    _, block_size, num_kv_heads, cache_dim = k_cache.shape
    packed = 2 if k_cache.dtype == torch.uint8 else 1  # 4-bit codes: two per byte
    if (
        k_cache.device.type != "cpu" or not k_cache.is_contiguous() or not v_cache.is_contiguous()
        or v_cache.shape != k_cache.shape or v_cache.dtype != k_cache.dtype or cache_dim * packed != head_dim
        or num_heads % num_kv_heads or k_cache.dtype not in KV_DTYPE_CODES
        or not _scales_fit(k_cache, k_scale) or not _scales_fit(k_cache, v_scale)
    ):
        raise ValueError("paged_decode_attention: cache tensors do not match the native kernel's layout")
    q = query.to(torch.float32).contiguous()
    tables = block_tables.to(torch.int32).contiguous()
    lens = seq_lens.to(torch.int32).contiguous()
    out = torch.empty_like(q)
    args = (
        q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), tables.data_ptr(), tables.stride(0),
        lens.data_ptr(), out.data_ptr(), num_seqs, num_heads, num_kv_heads, head_dim, block_size,
        scale, KV_DTYPE_CODES[k_cache.dtype], torch.get_num_threads(),
        0 if k_scale is None else k_scale.data_ptr(), 0 if v_scale is None else v_scale.data_ptr(),
    )
    rc = (lib.paged_decode_attention(*args) if window is None
          else lib.paged_decode_attention_windowed(*args, max(window, 1)))
    if rc != 0:
        raise MemoryError("paged_decode_attention: no scratch memory")
    return out if query.dtype == torch.float32 else out.to(query.dtype)


def _scales_fit(cache: torch.Tensor, scales: torch.Tensor | None) -> bool:
    """A quantized cache needs its float16 scales [blocks, block_size, kv_heads, 1 | 2]; a float one none."""
    if cache.dtype not in (torch.int8, torch.uint8):
        return scales is None
    width = 1 if cache.dtype == torch.int8 else 2
    return (scales is not None and scales.dtype == torch.float16 and scales.is_contiguous()
            and tuple(scales.shape) == (*cache.shape[:3], width))


def paged_prefill_attention(
    query: torch.Tensor,  # [num_tokens, num_heads, head_dim]
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,  # [num_seqs, max_blocks] int32
    query_start_loc: torch.Tensor,  # [num_seqs + 1] int32
    seq_lens: torch.Tensor,  # [num_seqs] int32
    scale: float,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
    window: int | None = None,
) -> torch.Tensor:  # [num_tokens, num_heads, head_dim]
    """Same contract as `kernels.ops.reference.paged_prefill_attention`: natively for a float32
    cache (cpu_attention.c: no gather, no mask tensor, every sequence in one call), the
    reference (torch's SDPA per sequence) for anything else."""
    num_tokens, num_heads, head_dim = query.shape
    fits = (
        k_scale is None and query.dtype == k_cache.dtype == v_cache.dtype == torch.float32
        and head_dim % LANES == 0 and head_dim <= 128 and k_cache.device.type == "cpu" and k_cache.is_contiguous()
        and v_cache.is_contiguous() and num_heads % k_cache.shape[2] == 0 and k_cache.shape[3] == head_dim
        and v_cache.shape == k_cache.shape
    )
    lib = library() if fits else None
    if lib is None:
        return reference.paged_prefill_attention(query, k_cache, v_cache, block_tables, query_start_loc, seq_lens,
                                                 scale, k_scale, v_scale, window)
    q = query.contiguous()
    tables = block_tables.to(torch.int32).contiguous()
    starts = query_start_loc.to(torch.int32).contiguous()
    lens = seq_lens.to(torch.int32).contiguous()
    out = torch.empty_like(q)
    args = (
        q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), tables.data_ptr(), tables.stride(0), starts.data_ptr(),
        lens.data_ptr(), out.data_ptr(), lens.shape[0], num_heads, k_cache.shape[2], head_dim, k_cache.shape[1],
        scale, torch.get_num_threads(),
    )
    rc = (lib.paged_prefill_attention(*args) if window is None
          else lib.paged_prefill_attention_windowed(*args, max(window, 1)))
    if rc != 0:
        raise MemoryError("paged_prefill_attention: no scratch memory")
    return out
