"""Triton prefill / chunked-prefill attention over the paged KV cache.

Same contract as `kernels.ops.reference.paged_prefill_attention`: each sequence's new tokens (packed
varlen in `query`) attend causally to its cached prefix and to themselves, whose K/V are already
in the cache. One program owns a tile of BLOCK_M new tokens of one sequence for one query head
and streams that sequence's K/V tiles through an online softmax (flash-attention style). Tiles
entirely after the tile's last query position are never visited (causal work is halved), and
tiles entirely before its first row skip the causal mask.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fairgate.kernels.triton.common import (
    cdiv,
    check_device,
    dot_config,
    kv_quant_args,
    load_kv_rows,
)

_LOG2E = 1.4426950408889634


@triton.jit
def _attend_keys(
    q, m, l_sum, acc, q_pos,  # q [BM, BD]; running max, sum [BM]; acc [BM, BD]; q_pos [BM]
    k_cache_ptr, v_cache_ptr, table_row, kv_head, lo, hi, qk_scale,
    stride_k_b, stride_k_t, stride_k_h, stride_v_b, stride_v_t, stride_v_h,
    k_scale_ptr, v_scale_ptr, stride_ks_b, stride_ks_t, stride_ks_h, stride_vs_b, stride_vs_t, stride_vs_h,
    HEAD_DIM: tl.constexpr, BLOCK_SIZE: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr, DOT_DTYPE: tl.constexpr, DOT_PRECISION: tl.constexpr,
    CAUSAL_MASK: tl.constexpr, KV_QUANT: tl.constexpr,
):
    """Online-softmax update of (m, l_sum, acc) with keys lo .. hi-1 of one sequence."""
    offs_d = tl.arange(0, BLOCK_D)
    mask_d = offs_d < HEAD_DIM
    for n0 in range(lo, hi, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        mask_n = offs_n < hi
        block = tl.load(table_row + offs_n // BLOCK_SIZE, mask=mask_n, other=0).to(tl.int64)
        in_block = offs_n % BLOCK_SIZE
        k_rows = block * stride_k_b + in_block * stride_k_t + kv_head * stride_k_h  # [BN]
        v_rows = block * stride_v_b + in_block * stride_v_t + kv_head * stride_v_h
        ks_rows = block * stride_ks_b + in_block * stride_ks_t + kv_head * stride_ks_h
        vs_rows = block * stride_vs_b + in_block * stride_vs_t + kv_head * stride_vs_h
        k = load_kv_rows(k_cache_ptr, k_rows, k_scale_ptr, ks_rows, offs_d, mask_n, mask_d, KV_QUANT)
        s = tl.dot(q, tl.trans(k.to(DOT_DTYPE)), input_precision=DOT_PRECISION) * qk_scale
        if CAUSAL_MASK:  # only the tiles that straddle the diagonal or the context end
            visible = mask_n[None, :] & (offs_n[None, :] <= q_pos[:, None])  # [BM, BN]
            s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m - m_new)
        l_sum = l_sum * alpha + tl.sum(p, axis=1)
        v = load_kv_rows(v_cache_ptr, v_rows, v_scale_ptr, vs_rows, offs_d, mask_n, mask_d, KV_QUANT)
        pv = tl.dot(p.to(DOT_DTYPE), v.to(DOT_DTYPE), input_precision=DOT_PRECISION)  # [BM, BD]
        acc = acc * alpha[:, None] + pv
        m = m_new
    return m, l_sum, acc


@triton.jit
def _prefill_kernel(
    q_ptr, k_cache_ptr, v_cache_ptr, block_tables_ptr, query_start_loc_ptr, seq_lens_ptr, out_ptr,
    k_scale_ptr, v_scale_ptr,  # quantized caches: [num_blocks, block_size, Hkv, 1 | 2] float16
    qk_scale,  # softmax scale * log2(e)
    stride_q_t, stride_q_h,  # query: [num_tokens, num_heads, head_dim]
    stride_k_b, stride_k_t, stride_k_h,  # k_cache: [num_blocks, block_size, Hkv, D]
    stride_v_b, stride_v_t, stride_v_h,
    stride_bt_s,  # block_tables: [num_seqs, max_blocks]
    stride_o_t, stride_o_h,
    stride_ks_b, stride_ks_t, stride_ks_h, stride_vs_b, stride_vs_t, stride_vs_h,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_SIZE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    DOT_DTYPE: tl.constexpr, DOT_PRECISION: tl.constexpr, KV_QUANT: tl.constexpr,
):
    tile = tl.program_id(0)
    seq = tl.program_id(1)
    head = tl.program_id(2)
    q_start = tl.load(query_start_loc_ptr + seq)
    q_len = tl.load(query_start_loc_ptr + seq + 1) - q_start
    if tile * BLOCK_M >= q_len:
        return  # the grid is sized for the longest sequence
    ctx_len = tl.load(seq_lens_ptr + seq)
    kv_head = head // GROUP

    offs_m = tile * BLOCK_M + tl.arange(0, BLOCK_M)  # index among this sequence's new tokens
    offs_d = tl.arange(0, BLOCK_D)
    mask_m = offs_m < q_len
    mask_d = offs_d < HEAD_DIM
    first_pos = ctx_len - q_len + tile * BLOCK_M  # absolute position of the tile's first row
    q_pos = first_pos + tl.arange(0, BLOCK_M)  # [BM]
    tokens = (q_start + offs_m).to(tl.int64)
    q_ptrs = q_ptr + tokens[:, None] * stride_q_t + head * stride_q_h + offs_d[None, :]
    q = tl.load(q_ptrs, mask=mask_m[:, None] & mask_d[None, :], other=0.0)
    q = q.to(DOT_DTYPE)  # [BM, BD]

    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    table_row = block_tables_ptr + seq.to(tl.int64) * stride_bt_s
    # Keys before the tile's first row are visible to every row: whole tiles of them need no
    # mask. Keys past its last row are visible to none: never visited. Whichever phase runs
    # first starts at a key every row sees, so m is finite from then on (no NaN).
    full_end = (first_pos // BLOCK_N) * BLOCK_N
    kv_end = tl.minimum(ctx_len, first_pos + BLOCK_M)
    m, l_sum, acc = _attend_keys(
        q, m, l_sum, acc, q_pos, k_cache_ptr, v_cache_ptr, table_row, kv_head, 0, full_end,
        qk_scale, stride_k_b, stride_k_t, stride_k_h, stride_v_b, stride_v_t, stride_v_h,
        k_scale_ptr, v_scale_ptr, stride_ks_b, stride_ks_t, stride_ks_h, stride_vs_b, stride_vs_t, stride_vs_h,
        HEAD_DIM, BLOCK_SIZE, BLOCK_N, BLOCK_D, DOT_DTYPE, DOT_PRECISION, CAUSAL_MASK=False, KV_QUANT=KV_QUANT,
    )
    m, l_sum, acc = _attend_keys(
        q, m, l_sum, acc, q_pos, k_cache_ptr, v_cache_ptr, table_row, kv_head, full_end, kv_end,
        qk_scale, stride_k_b, stride_k_t, stride_k_h, stride_v_b, stride_v_t, stride_v_h,
        k_scale_ptr, v_scale_ptr, stride_ks_b, stride_ks_t, stride_ks_h, stride_vs_b, stride_vs_t, stride_vs_h,
        HEAD_DIM, BLOCK_SIZE, BLOCK_N, BLOCK_D, DOT_DTYPE, DOT_PRECISION, CAUSAL_MASK=True, KV_QUANT=KV_QUANT,
    )

    out = acc / l_sum[:, None]
    o_ptrs = out_ptr + tokens[:, None] * stride_o_t + head * stride_o_h + offs_d[None, :]
    tl.store(o_ptrs, out.to(out_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_d[None, :])


def prefill_attention(
    query: torch.Tensor,  # [num_tokens, num_heads, head_dim]
    k_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_dim]
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,  # [num_seqs, max_blocks] int32
    query_start_loc: torch.Tensor,  # [num_seqs + 1] int32
    seq_lens: torch.Tensor,  # [num_seqs] int32
    scale: float,
    max_query_len: int | None = None,
    block_m: int | None = None,
    block_n: int | None = None,
    num_warps: int = 4,
    num_stages: int = 2,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> torch.Tensor:  # [num_tokens, num_heads, head_dim]
    """`paged_prefill_attention` with the tile sizes exposed (tests use small tiles)."""
    check_device(query, _prefill_kernel)
    num_tokens, num_heads, head_dim = query.shape
    out = query.new_empty(query.shape)  # contiguous: the kernels store with head_dim stride 1
    num_seqs = seq_lens.shape[0]
    if num_tokens == 0 or num_seqs == 0:
        return out
    _, block_size, num_kv_heads, _ = k_cache.shape
    if query.stride(-1) != 1:
        query = query.contiguous()
    dot_dtype, dot_precision = dot_config(k_cache.dtype, _prefill_kernel)
    kv_quant, k_scale, *ks_strides = kv_quant_args(k_cache, k_scale)
    _, v_scale, *vs_strides = kv_quant_args(v_cache, v_scale)
    if max_query_len is None:
        max_query_len = int((query_start_loc[1:] - query_start_loc[:-1]).max())  # host sync
    if max_query_len == 0:
        return out
    block_m = block_m or 64
    block_n = block_n or (64 if head_dim <= 128 else 32)
    grid = (cdiv(max_query_len, block_m), num_seqs, num_heads)
    _prefill_kernel[grid](
        query, k_cache, v_cache, block_tables, query_start_loc, seq_lens, out, k_scale, v_scale,
        scale * _LOG2E,
        query.stride(0), query.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        block_tables.stride(0),
        out.stride(0), out.stride(1), *ks_strides, *vs_strides,
        GROUP=num_heads // num_kv_heads, HEAD_DIM=head_dim, BLOCK_SIZE=block_size,
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=triton.next_power_of_2(head_dim),
        DOT_DTYPE=dot_dtype, DOT_PRECISION=dot_precision, KV_QUANT=kv_quant,
        num_warps=num_warps, num_stages=num_stages,
    )
    return out


def paged_prefill_attention(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    query_start_loc: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
    window: int | None = None,
) -> torch.Tensor:
    """Causal attention of each sequence's new tokens over its cached prefix plus themselves.

    See `kernels.ops.reference.paged_prefill_attention` for shapes and the position convention.
    A `window` (Gemma 3's sliding layers) runs the torch reference: this kernel does not window.
    """
    if window is not None:
        from fairgate.kernels.ops import reference

        return reference.paged_prefill_attention(query, k_cache, v_cache, block_tables, query_start_loc, seq_lens,
                                                 scale, k_scale, v_scale, window)
    return prefill_attention(query, k_cache, v_cache, block_tables, query_start_loc, seq_lens, scale,
                             k_scale=k_scale, v_scale=v_scale)
