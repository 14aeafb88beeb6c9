"""The fused elementwise CPU kernels (native/cpu_fused.c): RMSNorm with the residual add folded in,
Qwen3's per-head q/k RMSNorm, SwiGLU, rotary embedding with the KV-cache write, and a row-wise
argmax. Same contracts as `kernels.ops.reference`; float32 contiguous CPU tensors take the native
path, anything else the reference.
"""

from __future__ import annotations

import ctypes

import torch

from fairgate.kernels.native import abi
from fairgate.kernels.ops import reference


def library() -> ctypes.CDLL | None:
    """The fused library (native/cpu_fused.c), or None where it cannot be built here."""
    return abi.load(abi.FUSED)


def _native(*tensors: torch.Tensor | None) -> ctypes.CDLL | None:
    """The library when every given tensor is a contiguous float32 CPU tensor, else None."""
    for t in tensors:
        if t is not None and (t.dtype != torch.float32 or t.device.type != "cpu" or not t.is_contiguous()):
            return None
    return library()


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float,
             residual: torch.Tensor | None = None) -> torch.Tensor:
    """See `kernels.ops.reference.rms_norm`."""
    lib = _native(x, weight, residual)
    if lib is None or x.dim() != 2:
        return reference.rms_norm(x, weight, eps, residual)
    out = torch.empty_like(x)
    rows, n = x.shape
    lib.rms_norm(x.data_ptr(), 0 if residual is None else residual.data_ptr(), weight.data_ptr(), out.data_ptr(),
                 rows, n, eps, torch.get_num_threads())
    return out


def silu_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """See `kernels.ops.reference.silu_mul`."""
    lib = _native(gate_up)
    if lib is None or gate_up.dim() != 2:
        return reference.silu_mul(gate_up)
    rows, width = gate_up.shape
    out = gate_up.new_empty(rows, width // 2)
    lib.silu_mul(gate_up.data_ptr(), out.data_ptr(), rows, width // 2, torch.get_num_threads())
    return out


def rope_write_kv(qkv: torch.Tensor, cos_sin: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                  slot_mapping: torch.Tensor, num_heads: int) -> torch.Tensor | None:
    """`kernels.ops.reference.rope_write_kv` for float32 caches in one pass (same bits); None when
    the tensors do not fit the native layout (the caller takes the reference path)."""
    lib = _native(qkv, cos_sin, k_cache, v_cache)
    num_tokens, head_dim = qkv.shape[0], cos_sin.shape[-1]
    num_kv_heads = k_cache.shape[-2]
    if (lib is None or qkv.dim() != 2 or head_dim % 2 or k_cache.shape[-1] != head_dim
            or v_cache.shape != k_cache.shape or qkv.shape[1] != (num_heads + 2 * num_kv_heads) * head_dim
            or slot_mapping.dtype != torch.int64 or not slot_mapping.is_contiguous()):
        return None
    q = qkv.new_empty(num_tokens, num_heads, head_dim)
    lib.rope_write_kv(qkv.data_ptr(), cos_sin.data_ptr(), slot_mapping.data_ptr(), q.data_ptr(), k_cache.data_ptr(),
                      v_cache.data_ptr(), num_tokens, num_heads, num_kv_heads, head_dim, torch.get_num_threads())
    return q


def qk_norm(qkv: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, eps: float, num_heads: int,
            num_kv_heads: int) -> torch.Tensor:
    """See `kernels.ops.reference.qk_norm` (in place, one pass over the q and k heads)."""
    lib = _native(qkv, q_weight, k_weight)
    head_dim = q_weight.shape[0]
    if (lib is None or qkv.dim() != 2 or k_weight.shape != q_weight.shape
            or qkv.shape[1] != (num_heads + 2 * num_kv_heads) * head_dim):
        return reference.qk_norm(qkv, q_weight, k_weight, eps, num_heads, num_kv_heads)
    lib.qk_norm(qkv.data_ptr(), q_weight.data_ptr(), k_weight.data_ptr(), qkv.shape[0], num_heads, num_kv_heads,
                head_dim, eps, torch.get_num_threads())
    return qkv


def argmax(logits: torch.Tensor) -> torch.Tensor:
    """See `kernels.ops.reference.argmax`."""
    lib = _native(logits)
    if lib is None or logits.dim() != 2:
        return reference.argmax(logits)
    rows, n = logits.shape
    out = torch.empty(rows, dtype=torch.int64)
    lib.argmax_rows(logits.data_ptr(), out.data_ptr(), rows, n, n, torch.get_num_threads())
    return out
