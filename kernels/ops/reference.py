"""Plain-torch reference kernels. Same signatures as the Triton kernels; used on every non-CUDA device.

Cache layout (both K and V): [num_blocks, block_size, num_kv_heads, head_dim].
A block table row lists a sequence's block ids in order; padding entries must be valid
block ids (use 0), they are masked by `seq_lens`.

Quantized caches (int8 / 4-bit codes, `kernels.ops.kv_quant`) come with `k_scale` / `v_scale`
[num_blocks, block_size, num_kv_heads, 1 | 2]; rows are quantized on write and turned back
into float only for the rows one call reads (per sequence here; in registers natively).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from fairgate.kernels.ops.kv_quant import float_rows, is_quantized, quantize_rows


def apply_rope(x: torch.Tensor, cos_sin: torch.Tensor) -> torch.Tensor:
    """Rotate x [T, H, D] by cos_sin [T, 2, D] (rows already gathered for each token's position;
    row 0 cos, row 1 (-sin, sin): backends/local/model/rope.py builds the table).

    out = x * cos + rotate_half(x) * sin, where rotate_half(x) = (-x2, x1) = roll(x) * (-1, 1).
    """
    half = x.shape[-1] // 2
    cos = cos_sin[:, None, 0]  # [T, 1, D]
    signed_sin = cos_sin[:, None, 1]
    return torch.addcmul(x * cos, torch.roll(x, shifts=half, dims=-1), signed_sin)


def rope_write_kv(
    qkv: torch.Tensor,  # [num_tokens, (num_heads + 2 * num_kv_heads) * head_dim]: q, k, v heads
    cos_sin: torch.Tensor,  # [num_tokens, 2, head_dim]
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,  # [num_tokens] int64
    num_heads: int,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> torch.Tensor:  # [num_tokens, num_heads, head_dim], the rotated queries
    """Rotate q and k (`apply_rope`), store k and v in their slots (`write_kv`); return q."""
    q, k, v = rotate_qkv(qkv, cos_sin, num_heads, k_cache.shape[2])
    write_kv(k, v, k_cache, v_cache, slot_mapping, k_scale, v_scale)
    return q


def rotate_qkv(qkv: torch.Tensor, cos_sin: torch.Tensor, num_heads: int,
               num_kv_heads: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Split qkv into q [T, H, D], k, v [T, Hkv, D] views, q and k rotated (one rope call)."""
    num_tokens, head_dim = qkv.shape[0], cos_sin.shape[-1]
    q_kv = (num_heads + num_kv_heads) * head_dim
    qk = apply_rope(qkv[:, :q_kv].view(num_tokens, -1, head_dim), cos_sin)  # [T, H + Hkv, D]
    v = qkv[:, q_kv:].view(num_tokens, num_kv_heads, head_dim)
    return qk[:, :num_heads], qk[:, num_heads:], v


def write_kv(
    key: torch.Tensor,  # [num_tokens, num_kv_heads, head_dim]
    value: torch.Tensor,  # [num_tokens, num_kv_heads, head_dim]
    k_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_dim]
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,  # [num_tokens] int64, slot = block_id * block_size + offset
    k_scale: torch.Tensor | None = None,  # [num_blocks, block_size, num_kv_heads, S] for codes
    v_scale: torch.Tensor | None = None,
) -> None:
    """Store each token's K and V in its slot, in place (quantized when the cache holds codes)."""
    num_kv_heads, width = k_cache.shape[2], k_cache.shape[3]
    if is_quantized(k_cache):
        for x, cache, scales in ((key, k_cache, k_scale), (value, v_cache, v_scale)):
            codes, sc = quantize_rows(x, cache.dtype)  # [T, Hkv, W], [T, Hkv, S]
            cache.view(-1, num_kv_heads, width)[slot_mapping] = codes
            scales.view(-1, num_kv_heads, scales.shape[-1])[slot_mapping] = sc
        return
    k_cache.view(-1, num_kv_heads, width)[slot_mapping] = key.to(k_cache.dtype)
    v_cache.view(-1, num_kv_heads, width)[slot_mapping] = value.to(v_cache.dtype)


def paged_decode_attention(
    query: torch.Tensor,  # [num_seqs, num_heads, head_dim], one token per sequence
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,  # [num_seqs, max_blocks] int32
    seq_lens: torch.Tensor,  # [num_seqs] int32, context length including the new token
    scale: float,
    max_seq_len: int | None = None,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
    window: int | None = None,
) -> torch.Tensor:  # [num_seqs, num_heads, head_dim]
    """Attention of each sequence's newest token over its whole cached context, or with `window`
    (Gemma 3's sliding layers) over its last `window` positions (keys at p - window < j <= p)."""
    num_seqs = query.shape[0]
    if num_seqs == 0:
        return query.new_empty(query.shape)
    if query.device.type != "cpu" or is_quantized(k_cache) or window is not None:
        return _decode_padded(query, k_cache, v_cache, block_tables, seq_lens, scale, max_seq_len,
                              k_scale, v_scale, window)
    # CPU: one sequence at a time, so no batch-sized temporary is made (page faults on every
    # fresh large allocation) and no padding to the longest context is computed. A table's
    # leading run of consecutive block ids (a prompt allocated in one go) is read in place as a
    # view; only the scattered rest is gathered, and the two partial results are merged by
    # their log-sum-exp, so most of the context is read from the cache exactly once.
    _, num_heads, head_dim = query.shape
    block_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    group = num_heads // num_kv_heads
    lens = seq_lens.tolist()
    max_blocks = (max(lens) + block_size - 1) // block_size
    tables = block_tables[:, :max_blocks]
    # leading-run length per sequence: 1 + number of leading +1 steps in the block ids
    steps = (tables[:, 1:] - tables[:, :-1]) == 1  # [S, nb - 1]
    lead_runs = (1 + steps.to(torch.int32).cumprod(dim=1).sum(dim=1)).tolist()
    out = torch.empty_like(query)
    for i, ctx_len in enumerate(lens):
        num_blocks = (ctx_len + block_size - 1) // block_size
        run = min(lead_runs[i], num_blocks)
        # The G query heads sharing a KV head act as G queries of that head: no K/V repeat.
        q = query[i].view(1, num_kv_heads, group, head_dim).float()
        if run < _MIN_VIEW_RUN or _flash_with_lse is None:
            run = 0  # too short to be worth a separate pass: gather everything
        parts = []
        if run:
            first = int(tables[i, 0])
            n_view = min(run * block_size, ctx_len)
            k = k_cache[first : first + run].view(-1, num_kv_heads, head_dim)[:n_view]  # [T1, Hkv, D]
            v = v_cache[first : first + run].view(-1, num_kv_heads, head_dim)[:n_view]
            parts.append((k, v))
        if run < num_blocks:
            rest = tables[i, run:num_blocks]
            n_rest = ctx_len - run * block_size
            k = k_cache.index_select(0, rest).view(-1, num_kv_heads, head_dim)[:n_rest]  # [T2, Hkv, D]
            v = v_cache.index_select(0, rest).view(-1, num_kv_heads, head_dim)[:n_rest]
            parts.append((k, v))
        if len(parts) == 1:
            k, v = parts[0]
            o = F.scaled_dot_product_attention(
                q, k.float().transpose(0, 1)[None], v.float().transpose(0, 1)[None], scale=scale
            )  # [1, Hkv, G, D]; 4-D inputs select the fused CPU flash kernel
        else:
            o = _merge_by_lse(q, parts, scale)
        out[i] = o.view(num_heads, head_dim)
    return out


# Below this many consecutive leading blocks, a second attention pass costs more than a gather.
_MIN_VIEW_RUN = 4
_flash_with_lse = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


def _merge_by_lse(q: torch.Tensor, parts, scale: float) -> torch.Tensor:
    """Attention over the concatenation of `parts` ((k, v) [T_i, Hkv, D] each) without
    concatenating them: softmax-weighted partial outputs combined by their log-sum-exp."""
    outs, lses = [], []
    for k, v in parts:
        o, lse = _flash_with_lse(
            q, k.float().transpose(0, 1)[None], v.float().transpose(0, 1)[None], 0.0, False, scale=scale
        )  # o [1, Hkv, G, D], lse [1, Hkv, G]
        outs.append(o)
        lses.append(lse)
    lse = torch.stack(lses)  # [P, 1, Hkv, G]
    weights = torch.softmax(lse, dim=0).unsqueeze(-1)  # [P, 1, Hkv, G, 1]
    return (torch.stack(outs) * weights).sum(dim=0)  # [1, Hkv, G, D]


def _decode_padded(query, k_cache, v_cache, block_tables, seq_lens, scale, max_seq_len,
                   k_scale=None, v_scale=None, window=None):
    """Batched form of `paged_decode_attention` (no per-sequence loop, no host sync when
    max_seq_len is given); pads every sequence to the longest context."""
    num_seqs, num_heads, head_dim = query.shape
    block_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    group = num_heads // num_kv_heads
    if max_seq_len is None:
        max_seq_len = int(seq_lens.max())
    num_blocks = (max_seq_len + block_size - 1) // block_size
    tables = block_tables[:, :num_blocks].long()  # [S, nb]
    lens = seq_lens.long()
    first = torch.zeros_like(lens)  # each row's first block read
    if window is not None:  # read only the blocks that hold a window (a long context's few last ones)
        first = torch.clamp(lens - window, min=0) // block_size
        span = min(num_blocks, (window + block_size - 1) // block_size + 1)
        cols = torch.arange(span, device=tables.device)
        tables = torch.gather(tables, 1, (first[:, None] + cols).clamp(max=num_blocks - 1))  # past the end: masked
        num_blocks = span
    ctx = num_blocks * block_size
    k = float_rows(k_cache[tables], None if k_scale is None else k_scale[tables])
    v = float_rows(v_cache[tables], None if v_scale is None else v_scale[tables])
    k = k.reshape(num_seqs, ctx, num_kv_heads, head_dim)  # [S, T, Hkv, D]
    v = v.reshape(num_seqs, ctx, num_kv_heads, head_dim)
    q = query.float().view(num_seqs, num_kv_heads, group, head_dim)  # [S, Hkv, G, D]
    scores = torch.matmul(q, k.float().permute(0, 2, 3, 1)) * scale  # [S, Hkv, G, T]
    positions = first[:, None] * block_size + torch.arange(ctx, device=query.device)  # [S, T], of each key read
    masked = positions >= lens[:, None]  # [S, T]
    if window is not None:  # the query sits at seq_len - 1 and sees keys after seq_len - 1 - window
        masked |= positions < lens[:, None] - window
    scores.masked_fill_(masked[:, None, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    out = torch.matmul(probs, v.float().permute(0, 2, 1, 3))  # [S, Hkv, G, D]
    return out.reshape(num_seqs, num_heads, head_dim).to(query.dtype)


def paged_prefill_attention(
    query: torch.Tensor,  # [num_tokens, num_heads, head_dim], new tokens of all sequences
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,  # [num_seqs, max_blocks] int32
    query_start_loc: torch.Tensor,  # [num_seqs + 1] int32, offsets of each sequence in query
    seq_lens: torch.Tensor,  # [num_seqs] int32, context length including the new tokens
    scale: float,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
    window: int | None = None,
) -> torch.Tensor:  # [num_tokens, num_heads, head_dim]
    """Causal attention of each sequence's new tokens over its cached prefix plus themselves
    (with `window`: only the keys at p - window < j <= p, as in `paged_decode_attention`).

    The new tokens of sequence i sit at the last (qe - qs) positions of its seq_lens[i]
    context; their K/V must already be written to the cache.
    """
    num_tokens, num_heads, head_dim = query.shape
    out = torch.empty_like(query)
    block_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    gqa = num_heads != num_kv_heads
    quantized = is_quantized(k_cache)
    starts = query_start_loc.tolist()
    lens = seq_lens.tolist()
    for i, ctx_len in enumerate(lens):
        qs, qe = starts[i], starts[i + 1]
        q_len = qe - qs
        if q_len == 0:
            continue
        # with a window, the blocks before the first query's window are never read
        skip = 0 if window is None else max(0, ctx_len - q_len - window + 1) // block_size
        blocks = block_tables[i, skip : (ctx_len + block_size - 1) // block_size]
        first, last = int(blocks[0]), int(blocks[-1])
        if quantized:  # this sequence's rows only, as float
            k_blocks = float_rows(k_cache.index_select(0, blocks), k_scale.index_select(0, blocks))
            v_blocks = float_rows(v_cache.index_select(0, blocks), v_scale.index_select(0, blocks))
        elif last - first == len(blocks) - 1 and bool((blocks[1:] - blocks[:-1] == 1).all()):
            k_blocks, v_blocks = k_cache[first : last + 1], v_cache[first : last + 1]  # in place
        else:
            k_blocks, v_blocks = k_cache.index_select(0, blocks), v_cache.index_select(0, blocks)
        k = k_blocks.view(-1, num_kv_heads, head_dim)[: ctx_len - skip * block_size]  # [T, Hkv, D]
        v = v_blocks.view(-1, num_kv_heads, head_dim)[: ctx_len - skip * block_size]
        q = query[qs:qe].float().transpose(0, 1)[None]  # [1, H, q, D]; 4-D picks the flash kernel
        k, v = k.float().transpose(0, 1)[None], v.float().transpose(0, 1)[None]  # [1, Hkv, T, D]
        if q_len == ctx_len and (window is None or window >= ctx_len):
            # no cached prefix (and no window inside it): plain causal (the fused kernel skips masked tiles)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=gqa)
        else:  # query j sits at position ctx_len - q_len + j and sees keys up to there
            q_pos = torch.arange(ctx_len - q_len, ctx_len, device=query.device)
            k_pos = torch.arange(skip * block_size, ctx_len, device=query.device)
            mask = k_pos[None, :] <= q_pos[:, None]  # [q, T], True = attend
            if window is not None:
                mask &= k_pos[None, :] > q_pos[:, None] - window
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=gqa)
        o = o[0]  # [H, q, D]
        out[qs:qe] = o.transpose(0, 1).to(query.dtype)  # [q, H, D]
    return out


def rms_norm(
    x: torch.Tensor,  # [T, N]
    weight: torch.Tensor,  # [N]
    eps: float,
    residual: torch.Tensor | None = None,  # [T, N], the residual stream, updated in place
) -> torch.Tensor:  # [T, N]
    """x / rms(x) * weight over the last dimension. With `residual`: residual += x first (in
    place) and the sum is normalised, so a layer's residual add and the next norm are one call."""
    if residual is not None:
        x = residual.add_(x)
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def qk_norm(
    qkv: torch.Tensor,  # [T, (H + 2 Hkv) * D]: q, k, v heads
    q_weight: torch.Tensor,  # [D]
    k_weight: torch.Tensor,  # [D]
    eps: float,
    num_heads: int,
    num_kv_heads: int,
) -> torch.Tensor:  # qkv, its q and k heads normalised in place
    """Qwen3's per-head RMSNorm: each query head by `q_weight`, each key head by `k_weight`
    (values untouched), after the projection and before RoPE."""
    num_tokens, head_dim = qkv.shape[0], q_weight.shape[0]
    q_end, k_end = num_heads * head_dim, (num_heads + num_kv_heads) * head_dim
    for lo, hi, weight in ((0, q_end, q_weight), (q_end, k_end, k_weight)):
        heads = qkv[:, lo:hi].view(num_tokens, -1, head_dim)  # [T, H | Hkv, D]
        heads.copy_(F.rms_norm(heads, (head_dim,), weight, eps))
    return qkv


def gelu_tanh_mul(gate_up: torch.Tensor) -> torch.Tensor:  # [T, 2 I] -> [T, I]
    """Gemma's gated MLP activation: gelu_tanh(gate) * up (transformers' gelu_pytorch_tanh)."""
    gate, up = gate_up.chunk(2, dim=-1)
    return F.gelu(gate, approximate="tanh") * up


def silu_mul(gate_up: torch.Tensor) -> torch.Tensor:  # [T, 2 I] -> [T, I]
    """SwiGLU's activation: silu(gate) * up, gate and up the two halves of the last dimension."""
    gate, up = gate_up.chunk(2, dim=-1)
    return F.silu(gate).mul_(up)


def argmax(logits: torch.Tensor) -> torch.Tensor:  # [N, V] -> [N] int64
    """Each row's first index of its largest value (greedy sampling)."""
    return logits.argmax(dim=-1)


def quant_linear(x: torch.Tensor, qw, bias: torch.Tensor | None = None) -> torch.Tensor:
    """y = x W^T + b for a weight-only quantized W (`kernels.ops.quant_format.QuantizedWeight`).

    x [..., K] -> [..., N]; math in float32, result in x's dtype. Reference only: it rebuilds
    the float weight on every call, which the native and Triton kernels never do.
    """
    from fairgate.kernels.ops.quant_format import dequantize_weight

    y = F.linear(x.float(), dequantize_weight(qw), None if bias is None else bias.float())
    return y.to(x.dtype)
