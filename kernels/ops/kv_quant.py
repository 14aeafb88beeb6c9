"""Quantized KV-cache formats: codes in the cache blocks, scales in a tensor beside them.

Both formats quantize each (token, KV head) row of head_dim values on its own, so a row is
written once (in `write_kv`) and never re-quantized; the scales of slot s live at index s of
the scale tensor [num_blocks, block_size, num_kv_heads, S], so a block id names its codes and
its scales alike: prefix caching, block sharing and preemption work on quantized blocks
unchanged.

- int8 (cache dtype int8, S = 1): symmetric, x ~= code * scale, code in [-127, 127].
- int4 (cache dtype uint8, last dim head_dim / 2, S = 2): asymmetric, x ~= code * scale + min,
  code in [0, 15]. Packed per 16-element chunk c: byte c*8 + j holds element c*16 + j in the low
  nibble and element c*16 + j + 8 in the high nibble (the native kernel widens a chunk with one
  shift, like the int4 weights). head_dim must be a multiple of 16.
Scales are float16: a 64-wide head then costs 66 bytes (int8) or 36 bytes (int4) per token
against 128 in float16.
"""

from __future__ import annotations

import torch

SCALE_DTYPE = torch.float16
CHUNK = 16  # int4 packing unit (see the module doc)
KV_FORMATS = ("int8", "int4")


def cache_shape(kv_format: str, head_dim: int) -> tuple[torch.dtype, int, int]:
    """(code dtype, last dim of the code tensor, scale values per row) of a KV format."""
    if kv_format == "int8":
        return torch.int8, head_dim, 1
    if kv_format == "int4":
        if head_dim % CHUNK:
            raise ValueError(f"a 4-bit KV cache needs head_dim % {CHUNK} == 0, got {head_dim}")
        return torch.uint8, head_dim // 2, 2
    raise ValueError(f"unknown KV format {kv_format!r}; expected one of {KV_FORMATS}")


def is_quantized(cache: torch.Tensor) -> bool:
    return cache.dtype in (torch.int8, torch.uint8)


def quantize_rows(x: torch.Tensor, code_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., D] float -> (codes [..., D] int8 | [..., D/2] uint8, scales [..., 1 | 2] float16)."""
    x = x.float()
    if code_dtype == torch.int8:
        scale = (x.abs().amax(dim=-1, keepdim=True) / 127.0).to(SCALE_DTYPE).float().clamp(min=2**-24)
        codes = torch.round(x / scale).clamp(-127, 127).to(torch.int8)
        return codes, scale.to(SCALE_DTYPE)
    lo = x.amin(dim=-1, keepdim=True).to(SCALE_DTYPE).float()
    scale = ((x.amax(dim=-1, keepdim=True) - lo) / 15.0).to(SCALE_DTYPE).float().clamp(min=2**-24)
    codes = torch.round((x - lo) / scale).clamp(0, 15).to(torch.uint8)
    chunks = codes.view(*codes.shape[:-1], -1, 2, CHUNK // 2)  # [..., D/16, lo|hi, 8]
    packed = (chunks[..., 0, :] | (chunks[..., 1, :] << 4)).flatten(-2)  # [..., D/2]
    return packed, torch.cat([scale, lo], dim=-1).to(SCALE_DTYPE)


def dequantize_rows(codes: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """Inverse of `quantize_rows`: float32 [..., D]."""
    if codes.dtype == torch.int8:
        return codes.float() * scales.float()
    chunks = codes.view(*codes.shape[:-1], -1, CHUNK // 2)  # [..., D/16, 8]
    nibbles = torch.stack([chunks & 15, chunks >> 4], dim=-2).flatten(-3)  # [..., D]
    s = scales.float()
    return nibbles.float() * s[..., :1] + s[..., 1:]


def float_rows(cache: torch.Tensor, scales: torch.Tensor | None) -> torch.Tensor:
    """Rows of a cache slice as float32: dequantized when the cache holds codes."""
    if scales is None or not is_quantized(cache):
        return cache.float()
    return dequantize_rows(cache, scales)
