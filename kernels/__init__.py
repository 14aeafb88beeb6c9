"""Kernels for the paged engine. The engine calls only these dispatch functions.

On CUDA with Triton importable, the Triton kernels run; everywhere else the torch reference.
"""

from __future__ import annotations

import logging

import torch

from kernels import reference

log = logging.getLogger(__name__)

try:  # Triton kernels exist only where triton imports (Linux x86-64 with the package).
    from kernels import triton_ops as _triton_ops
except Exception as exc:  # noqa: BLE001 - any import failure means "use the torch path"
    _triton_ops = None
    _TRITON_ERROR: str | None = str(exc)
else:
    _TRITON_ERROR = None


def triton_available() -> bool:
    return _triton_ops is not None


def _use_triton(t: torch.Tensor) -> bool:
    return _triton_ops is not None and t.is_cuda


def write_kv(key, value, k_cache, v_cache, slot_mapping) -> None:
    """See `kernels.reference.write_kv`."""
    impl = _triton_ops if _use_triton(key) else reference
    impl.write_kv(key, value, k_cache, v_cache, slot_mapping)


def paged_decode_attention(query, k_cache, v_cache, block_tables, seq_lens, scale, max_seq_len=None):
    """See `kernels.reference.paged_decode_attention`."""
    impl = _triton_ops if _use_triton(query) else reference
    return impl.paged_decode_attention(
        query, k_cache, v_cache, block_tables, seq_lens, scale, max_seq_len
    )


def paged_prefill_attention(query, k_cache, v_cache, block_tables, query_start_loc, seq_lens, scale):
    """See `kernels.reference.paged_prefill_attention`."""
    impl = _triton_ops if _use_triton(query) else reference
    return impl.paged_prefill_attention(
        query, k_cache, v_cache, block_tables, query_start_loc, seq_lens, scale
    )


def describe_backend(device: torch.device | str) -> str:
    """One line for the startup log: which kernel path a device will use."""
    if torch.device(device).type == "cuda":
        if _triton_ops is not None:
            return "triton kernels"
        return f"torch reference kernels (triton unavailable: {_TRITON_ERROR})"
    return "torch reference kernels"
