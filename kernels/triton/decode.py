"""Triton decode attention over the paged KV cache (one new token per sequence).

Same contract as `kernels.ops.reference.paged_decode_attention`. Decode is memory-bound: every
cached K/V byte is read once per step and used by few FLOPs. So:
- one program serves all query heads of one KV head (GQA), reading each K/V tile once;
- long contexts are split into `num_splits` chunks processed by separate programs (flash-
  decoding), so a small batch still fills every SM; a second tiny kernel merges the chunks
  with their log-sum-exp. With one split the first kernel writes the output directly.
Softmax runs in base 2 (exp2) with the scale folded into log2(e); the merge uses the same base.
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
    sm_count,
)

_LOG2E = 1.4426950408889634
_MAX_SPLITS = 32
_MIN_TOKENS_PER_SPLIT = 256  # below this a split's fixed cost outweighs its parallelism


@triton.jit
def _decode_split_kernel(
    q_ptr, k_cache_ptr, v_cache_ptr, block_tables_ptr, seq_lens_ptr,
    out_ptr, part_out_ptr, part_lse_ptr,
    k_scale_ptr, v_scale_ptr,  # quantized caches: [num_blocks, block_size, Hkv, 1 | 2] float16
    qk_scale,  # softmax scale * log2(e)
    num_splits,  # runtime, so a growing context does not compile a new variant per split count
    stride_q_s, stride_q_h,  # query: [num_seqs, num_heads, head_dim]
    stride_k_b, stride_k_t, stride_k_h,  # k_cache: [num_blocks, block_size, Hkv, D]
    stride_v_b, stride_v_t, stride_v_h,
    stride_bt_s,  # block_tables: [num_seqs, max_blocks]
    stride_o_s, stride_o_h,  # out: [num_seqs, num_heads, head_dim]
    stride_ks_b, stride_ks_t, stride_ks_h, stride_vs_b, stride_vs_t, stride_vs_h,
    ONE_SPLIT: tl.constexpr, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_SIZE: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_N: tl.constexpr, DOT_DTYPE: tl.constexpr, DOT_PRECISION: tl.constexpr,
    KV_QUANT: tl.constexpr,
):
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    seq_len = tl.load(seq_lens_ptr + seq)
    # Each sequence cuts its own context into num_splits tile-aligned chunks, so a batch of
    # mixed lengths keeps every split busy instead of leaving short sequences' splits empty.
    tokens_per_split = tl.cdiv(tl.cdiv(seq_len, num_splits), BLOCK_N) * BLOCK_N
    start = split * tokens_per_split
    end = tl.minimum(start + tokens_per_split, seq_len)

    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, BLOCK_D)
    mask_g = offs_g < GROUP
    mask_d = offs_d < HEAD_DIM
    heads = kv_head * GROUP + offs_g  # [BG] query heads sharing this KV head
    q_ptrs = q_ptr + seq.to(tl.int64) * stride_q_s + heads[:, None] * stride_q_h + offs_d[None, :]
    q = tl.load(q_ptrs, mask=mask_g[:, None] & mask_d[None, :], other=0.0)
    q = q.to(DOT_DTYPE)  # [BG, BD]

    m = tl.full([BLOCK_G], float("-inf"), tl.float32)  # running max (log2 units)
    l_sum = tl.zeros([BLOCK_G], tl.float32)  # running sum of exp2
    acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)
    table_row = block_tables_ptr + seq.to(tl.int64) * stride_bt_s
    for n0 in range(start, end, BLOCK_N):
        # Every iteration holds >= 1 valid token, so m stays finite after the first one.
        offs_n = n0 + tl.arange(0, BLOCK_N)
        mask_n = offs_n < end
        block = tl.load(table_row + offs_n // BLOCK_SIZE, mask=mask_n, other=0).to(tl.int64)
        in_block = offs_n % BLOCK_SIZE
        k_rows = block * stride_k_b + in_block * stride_k_t + kv_head * stride_k_h  # [BN]
        v_rows = block * stride_v_b + in_block * stride_v_t + kv_head * stride_v_h
        ks_rows = block * stride_ks_b + in_block * stride_ks_t + kv_head * stride_ks_h
        vs_rows = block * stride_vs_b + in_block * stride_vs_t + kv_head * stride_vs_h
        k = load_kv_rows(k_cache_ptr, k_rows, k_scale_ptr, ks_rows, offs_d, mask_n, mask_d, KV_QUANT)
        s = tl.dot(q, tl.trans(k.to(DOT_DTYPE)), input_precision=DOT_PRECISION) * qk_scale
        s = tl.where(mask_n[None, :], s, float("-inf"))  # [BG, BN]
        m_new = tl.maximum(m, tl.max(s, axis=1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m - m_new)
        l_sum = l_sum * alpha + tl.sum(p, axis=1)
        v = load_kv_rows(v_cache_ptr, v_rows, v_scale_ptr, vs_rows, offs_d, mask_n, mask_d, KV_QUANT)
        pv = tl.dot(p.to(DOT_DTYPE), v.to(DOT_DTYPE), input_precision=DOT_PRECISION)  # [., BD]
        acc = acc * alpha[:, None] + pv
        m = m_new

    # An empty split (or a zero-length sequence) has l_sum == 0: give it weight 0, not NaN.
    out = acc / tl.where(l_sum > 0, l_sum, 1.0)[:, None]
    out_mask = mask_g[:, None] & mask_d[None, :]
    if ONE_SPLIT:
        o_ptrs = out_ptr + seq.to(tl.int64) * stride_o_s + heads[:, None] * stride_o_h + offs_d[None, :]
        tl.store(o_ptrs, out.to(out_ptr.dtype.element_ty), mask=out_mask)
    else:
        # part_out: [num_seqs, num_heads, num_splits, HEAD_DIM] fp32, part_lse: [S, H, num_splits]
        row = (seq.to(tl.int64) * (GROUP * tl.num_programs(1)) + heads) * num_splits + split  # [BG]
        tl.store(part_out_ptr + row[:, None] * HEAD_DIM + offs_d[None, :], out, mask=out_mask)
        lse = tl.where(l_sum > 0, m + tl.log2(tl.where(l_sum > 0, l_sum, 1.0)), float("-inf"))
        tl.store(part_lse_ptr + row, lse, mask=mask_g)


@triton.jit
def _decode_merge_kernel(
    part_out_ptr, part_lse_ptr, out_ptr,
    stride_o_s, stride_o_h,
    num_splits,
    HEAD_DIM: tl.constexpr,
    BLOCK_SPLITS: tl.constexpr, BLOCK_D: tl.constexpr,
):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    offs_s = tl.arange(0, BLOCK_SPLITS)
    offs_d = tl.arange(0, BLOCK_D)
    mask_s = offs_s < num_splits
    mask_d = offs_d < HEAD_DIM
    row = (seq.to(tl.int64) * tl.num_programs(1) + head) * num_splits + offs_s  # [BS]
    lse = tl.load(part_lse_ptr + row, mask=mask_s, other=float("-inf"))
    parts = tl.load(part_out_ptr + row[:, None] * HEAD_DIM + offs_d[None, :],
                    mask=mask_s[:, None] & mask_d[None, :], other=0.0)  # [BS, BD]
    m = tl.max(lse, axis=0)
    m = tl.where(m == float("-inf"), 0.0, m)  # all splits empty: weights 0, output 0
    w = tl.exp2(lse - m)  # [BS]
    total = tl.sum(w, axis=0)
    out = tl.sum(parts * w[:, None], axis=0) / tl.where(total > 0, total, 1.0)  # [BD]
    o_ptrs = out_ptr + seq.to(tl.int64) * stride_o_s + head * stride_o_h + offs_d
    tl.store(o_ptrs, out.to(out_ptr.dtype.element_ty), mask=mask_d)


def choose_num_splits(num_seqs: int, num_kv_heads: int, max_seq_len: int, device: torch.device) -> int:
    """Enough context splits that num_seqs * num_kv_heads * splits covers the SMs a few times."""
    programs = max(1, num_seqs * num_kv_heads)
    wanted = cdiv(4 * sm_count(device), programs)
    by_length = max(1, max_seq_len // _MIN_TOKENS_PER_SPLIT)
    return max(1, min(wanted, by_length, _MAX_SPLITS))


def decode_attention(
    query: torch.Tensor,  # [num_seqs, num_heads, head_dim]
    k_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_dim]
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,  # [num_seqs, max_blocks] int32
    seq_lens: torch.Tensor,  # [num_seqs] int32
    scale: float,
    max_seq_len: int | None = None,
    num_splits: int | None = None,
    block_n: int | None = None,
    num_warps: int = 4,
    num_stages: int = 2,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> torch.Tensor:  # [num_seqs, num_heads, head_dim]
    """`paged_decode_attention` with the tuning knobs exposed (tests force splits and tiles,
    bench/kernels_gpu.py sweeps them)."""
    check_device(query, _decode_split_kernel)
    num_seqs, num_heads, head_dim = query.shape
    out = query.new_empty(query.shape)  # contiguous: the kernels store with head_dim stride 1
    if num_seqs == 0:
        return out
    _, block_size, num_kv_heads, _ = k_cache.shape
    group = num_heads // num_kv_heads
    if query.stride(-1) != 1:
        query = query.contiguous()
    dot_dtype, dot_precision = dot_config(k_cache.dtype, _decode_split_kernel)
    kv_quant, k_scale, *ks_strides = kv_quant_args(k_cache, k_scale)
    _, v_scale, *vs_strides = kv_quant_args(v_cache, v_scale)
    if max_seq_len is None:
        max_seq_len = int(seq_lens.max())  # host sync: callers on the hot path pass it
    max_seq_len = max(1, max_seq_len)
    if num_splits is None:
        num_splits = choose_num_splits(num_seqs, num_kv_heads, max_seq_len, query.device)
    if block_n is None:
        block_n = 64 if head_dim <= 128 else 32
    num_splits = min(num_splits, cdiv(max_seq_len, block_n))  # at least one tile per split
    block_d = triton.next_power_of_2(head_dim)
    if num_splits > 1:
        part_out = torch.empty(num_seqs, num_heads, num_splits, head_dim,
                               dtype=torch.float32, device=query.device)
        part_lse = torch.empty(num_seqs, num_heads, num_splits, dtype=torch.float32,
                               device=query.device)
    else:
        part_out = part_lse = out  # unused by the kernel when ONE_SPLIT
    _decode_split_kernel[(num_seqs, num_kv_heads, num_splits)](
        query, k_cache, v_cache, block_tables, seq_lens,
        out, part_out, part_lse, k_scale, v_scale,
        scale * _LOG2E, num_splits,
        query.stride(0), query.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        block_tables.stride(0),
        out.stride(0), out.stride(1), *ks_strides, *vs_strides,
        ONE_SPLIT=num_splits == 1, GROUP=group, HEAD_DIM=head_dim, BLOCK_SIZE=block_size,
        # tl.dot needs M >= 16 on tensor cores; padded query rows are masked out.
        BLOCK_G=max(16, triton.next_power_of_2(group)), BLOCK_D=block_d, BLOCK_N=block_n,
        DOT_DTYPE=dot_dtype, DOT_PRECISION=dot_precision, KV_QUANT=kv_quant,
        num_warps=num_warps, num_stages=num_stages,
    )
    if num_splits > 1:
        _decode_merge_kernel[(num_seqs, num_heads)](
            part_out, part_lse, out, out.stride(0), out.stride(1), num_splits,
            HEAD_DIM=head_dim,
            BLOCK_SPLITS=triton.next_power_of_2(num_splits), BLOCK_D=block_d,
            num_warps=1,
        )
    return out


def paged_decode_attention(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    max_seq_len: int | None = None,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
    window: int | None = None,
) -> torch.Tensor:
    """Attention of each sequence's newest token over its whole cached context.

    See `kernels.ops.reference.paged_decode_attention` for shapes; splits are chosen automatically.
    A `window` (Gemma 3's sliding layers) runs the torch reference: this kernel does not window.
    """
    if window is not None:
        from fairgate.kernels.ops import reference

        return reference.paged_decode_attention(query, k_cache, v_cache, block_tables, seq_lens, scale, max_seq_len,
                                                k_scale, v_scale, window)
    return decode_attention(query, k_cache, v_cache, block_tables, seq_lens, scale, max_seq_len,
                            k_scale=k_scale, v_scale=v_scale)
