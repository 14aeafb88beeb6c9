"""Rotary position embedding: inverse frequencies for each scaling type, and their application.

Rotation is the "rotate half" (GPT-NeoX) layout Hugging Face Llama checkpoints use: the head
dimension splits into two halves that rotate as pairs (x[i], x[i + D/2]).

Every type follows transformers' modeling_rope_utils.py, including the attention factor yarn and
longrope multiply cos and sin by (folded into the table here, so every kernel path applies it).
longrope has two sets of frequencies: transformers picks the long set for a whole forward when
its longest position passes original_max_position_embeddings, the short set otherwise. The table
then holds both (short rows, then long rows) and `table_rows` picks the rows transformers'
generate uses for each token.

Partial rotary (Phi-3's partial_rotary_factor, rotary_dim R of D): transformers rotates a head's
first R dims as pairs (i, i + R/2) and passes the rest. The loader reorders each q and k head's
rows (`rotary_row_order`) so that those pairs sit at (i, i + D/2) and the passed dims pair with
each other, and the table's rows for the passed dims are cos 1, sin 0: every kernel's whole-head
rotation then computes exactly transformers' (q.k is unchanged when q and k share one order). One exception: transformers' Phi-3 drops its cache when a sequence
first passes the original context during decoding and re-rotates every earlier position by the
long set; the engine keeps the K it cached, so such a sequence's later tokens may differ from it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from fairgate.backends.local.model.config import ModelConfig, ModelConfigError
from fairgate.kernels import apply_rope

__all__ = ["apply_rope", "cos_sin_cache", "inv_frequencies", "attention_factor", "rotary_row_order", "table_rows"]


def inv_frequencies(cfg: ModelConfig, long: bool = False) -> torch.Tensor:  # [head_dim // 2] float32
    """Per-pair rotation frequency after the config's rope scaling (`long`: longrope's long set)."""
    rope, dim = cfg.rope, cfg.rotary_dim
    base = rope.theta
    if rope.rope_type == "yarn":
        return _yarn(cfg)
    if rope.rope_type == "longrope":
        factors = rope.long_factor if long else rope.short_factor
        if len(factors) != dim // 2:
            raise ModelConfigError(f"longrope needs {dim // 2} short and long factors (rotary dims / 2), got"
                                   f" {len(rope.short_factor)} and {len(rope.long_factor)}")
        shape = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
        return 1.0 / (torch.tensor(factors, dtype=torch.float32) * base**shape)
    if rope.rope_type == "dynamic":
        # Fixed NTK-aware base for the longest context served, so a cached K never needs
        # re-rotation; transformers instead grows the base with the current length, which
        # agrees once a sequence passes the original context.
        orig = rope.original_max_position_embeddings or cfg.max_position_embeddings
        max_len = orig * rope.factor
        base = base * ((rope.factor * max_len / orig) - (rope.factor - 1)) ** (dim / (dim - 2))
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    if rope.rope_type == "linear":
        inv_freq = inv_freq / rope.factor
    elif rope.rope_type == "llama3":
        inv_freq = _llama3_scale(inv_freq, cfg)
    return inv_freq


def attention_factor(cfg: ModelConfig) -> float:
    """What cos and sin are multiplied by: the config's attention_factor, else yarn's
    0.1 ln(factor) + 1 (or DeepSeek's mscale ratio), longrope's sqrt(1 + ln f / ln orig); 1 otherwise."""
    rope = cfg.rope
    if rope.rope_type not in ("yarn", "longrope"):
        return 1.0
    if rope.attention_factor is not None:
        return rope.attention_factor
    factor, orig = rope.factor, rope.original_max_position_embeddings or cfg.max_position_embeddings
    if rope.rope_type == "longrope":
        return 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(orig))
    if rope.mscale and rope.mscale_all_dim:
        return float(_yarn_mscale(factor, rope.mscale) / _yarn_mscale(factor, rope.mscale_all_dim))
    return _yarn_mscale(factor)


def _yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _yarn(cfg: ModelConfig) -> torch.Tensor:
    """YaRN (arXiv 2309.00071): interpolate (divide by `factor`) the low frequencies, keep the
    high ones, ramp linearly between the dims that turn beta_slow and beta_fast times over the
    original context."""
    rope, dim, base = cfg.rope, cfg.rotary_dim, cfg.rope.theta
    orig = rope.original_max_position_embeddings or cfg.max_position_embeddings

    def correction_dim(rotations: float) -> float:
        return (dim * math.log(orig / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(rope.beta_fast), correction_dim(rope.beta_slow)
    if rope.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # as transformers: no division by zero
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2).to(dtype=torch.float) / dim)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (rope.factor * pos_freqs)
    keep = 1 - ramp  # 1: the frequency is kept (extrapolated), 0: divided by factor
    return interpolation * (1 - keep) + extrapolation * keep


def _llama3_scale(inv_freq: torch.Tensor, cfg: ModelConfig) -> torch.Tensor:
    """Llama 3.1: keep high frequencies, divide low ones by `factor`, blend in between."""
    rope = cfg.rope
    old_len = rope.original_max_position_embeddings or cfg.max_position_embeddings
    wavelen = 2 * math.pi / inv_freq
    low_freq_wavelen = old_len / rope.low_freq_factor  # longer wavelengths: fully scaled
    high_freq_wavelen = old_len / rope.high_freq_factor  # shorter wavelengths: untouched
    smooth = (old_len / wavelen - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor)
    blended = (1 - smooth) * inv_freq / rope.factor + smooth * inv_freq
    out = torch.where(wavelen > low_freq_wavelen, inv_freq / rope.factor, inv_freq)
    medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
    return torch.where(medium, blended, out)


def cos_sin_cache(cfg: ModelConfig, max_positions: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """[max_positions, 2, head_dim] table: row 0 = cos for both halves, row 1 = (-sin, sin), both
    times the attention factor. longrope: [2 max_positions, 2, head_dim], short rows then long.

    Full-width, sign-folded rows let `apply_rope` rotate with one roll and two multiplies.
    """
    sets = [False, True] if cfg.rope.long_from is not None else [False]
    scale = attention_factor(cfg)
    pos = torch.arange(max_positions, dtype=torch.int64).float()
    tables = []
    for long in sets:
        freqs = pos[:, None] * inv_frequencies(cfg, long)[None, :]  # [P, R/2], fp32 like transformers
        cos, sin = freqs.cos(), freqs.sin()
        if scale != 1.0:
            cos, sin = cos * scale, sin * scale
        passed = (cfg.head_dim - cfg.rotary_dim) // 2  # partial rotary: these pairs do not turn
        if passed:
            cos = torch.cat([cos, torch.ones(len(pos), passed)], -1)  # [P, D/2]
            sin = torch.cat([sin, torch.zeros(len(pos), passed)], -1)
        tables.append(torch.stack([torch.cat([cos, cos], -1), torch.cat([-sin, sin], -1)], dim=1))  # [P, 2, D]
    return torch.cat(tables).to(dtype=dtype, device=device)


def rotary_row_order(cfg: ModelConfig) -> torch.Tensor | None:
    """For partial rotary: the order of a fused [q; k; v] projection's rows that puts each q and k
    head's rotated pairs (i, i + R/2) at (i, i + D/2), the passed dims in the halves' other places
    (v rows stay); None when the whole head rotates."""
    d, r = cfg.head_dim, cfg.rotary_dim
    if r == d:
        return None
    half, rest = r // 2, (d - r) // 2
    head = torch.cat([torch.arange(half), torch.arange(r, r + rest), torch.arange(half, r),
                      torch.arange(r + rest, d)])  # [D]: new place -> old dim
    heads = cfg.num_heads + cfg.num_kv_heads
    qk = (torch.arange(heads)[:, None] * d + head[None, :]).flatten()
    return torch.cat([qk, torch.arange(heads * d, heads * d + cfg.kv_size)])


def table_rows(positions: Sequence[int], table_len: int, long_from: int | None, prompt_len: int) -> list[int]:
    """The table rows of one sequence's `positions`: the positions themselves, or for longrope
    (`long_from` set) a long row where transformers' generate rotates by the long set: the whole
    sequence once its prompt passes `long_from` (its prefill is one forward that long), else each
    token from position `long_from` on (each decode step's forward is p + 1 long). A function of
    the position and the prompt's length only, so chunking, preemption and recompute, and prefix
    caching (which keys long prompts apart, kv_cache/block_manager.py) rotate alike."""
    if long_from is None:
        return list(positions)
    offset = table_len // 2
    return [p + offset if max(prompt_len, p + 1) > long_from else p for p in positions]
