"""Rotary position embedding: inverse frequencies for each scaling type, and their application.

Rotation is the "rotate half" (GPT-NeoX) layout Hugging Face Llama checkpoints use: the head
dimension splits into two halves that rotate as pairs (x[i], x[i + D/2]).
"""

from __future__ import annotations

import math

import torch

from fairgate.backends.local.model.config import ModelConfig
from fairgate.kernels import apply_rope

__all__ = ["apply_rope", "cos_sin_cache", "inv_frequencies"]


def inv_frequencies(cfg: ModelConfig) -> torch.Tensor:  # [head_dim // 2] float32
    """Per-pair rotation frequency after the config's rope scaling."""
    rope, dim = cfg.rope, cfg.head_dim
    base = rope.theta
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
    """[max_positions, 2, head_dim] table: row 0 = cos for both halves, row 1 = (-sin, sin).

    Full-width, sign-folded rows let `apply_rope` rotate with one roll and two multiplies.
    """
    inv_freq = inv_frequencies(cfg)  # [D/2]
    pos = torch.arange(max_positions, dtype=torch.int64).float()
    freqs = pos[:, None] * inv_freq[None, :]  # [P, D/2], fp32 like transformers
    cos, sin = freqs.cos(), freqs.sin()
    table = torch.stack([torch.cat([cos, cos], -1), torch.cat([-sin, sin], -1)], dim=1)  # [P, 2, D]
    return table.to(dtype=dtype, device=device)
