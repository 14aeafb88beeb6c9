"""Small helpers shared by the Triton kernel modules."""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl


def is_interpreted(kernel: object) -> bool:
    """True when `kernel` was built by the Triton interpreter (TRITON_INTERPRET=1 at import)."""
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(kernel, InterpretedFunction)


def check_device(t: torch.Tensor, kernel: object) -> None:
    """Fail with a clear message instead of a driver error deep inside Triton.

    Triton compiles for CUDA; CPU tensors work only under the interpreter, and `triton.jit`
    reads TRITON_INTERPRET when the kernel module is imported, not when it is called.
    """
    if t.is_cuda or is_interpreted(kernel):
        return
    raise RuntimeError(
        f"Triton kernels need CUDA tensors (got {t.device}); to run them on the CPU set "
        "TRITON_INTERPRET=1 before kernels.triton_ops is first imported"
    )


_TL_DTYPES = {torch.float32: tl.float32, torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}
# Quantized caches (kernels/ops/kv_quant.py): the KV_QUANT code the kernels take for a cache dtype.
KV_QUANT_CODES = {torch.int8: 1, torch.uint8: 2}


def kv_quant_args(cache: torch.Tensor, scales: torch.Tensor | None) -> tuple:
    """(KV_QUANT, scale tensor, its block/token/head strides) for one of the kernels' caches;
    a float cache passes itself as an unused scale pointer."""
    code = KV_QUANT_CODES.get(cache.dtype, 0)
    if code == 0:
        return 0, cache, 0, 0, 0
    if scales is None or scales.stride(-1) != 1 or scales.dtype != torch.float16:
        raise ValueError("a quantized KV cache needs its float16 scales (last dim contiguous)")
    return code, scales, scales.stride(0), scales.stride(1), scales.stride(2)


@triton.jit
def load_kv_rows(cache_ptr, rows, scale_ptr, scale_rows, offs_d, mask_n, mask_d, KV_QUANT: tl.constexpr):
    """A [BN, BD] tile of K or V rows (`rows`: each row's element offset in the cache): the
    stored values, or for a quantized cache the codes turned into float32 with the row's
    scales (int8: code * scale; 4-bit: code * scale + min, two codes a byte, see kv_quant.py)."""
    mask = mask_n[:, None] & mask_d[None, :]
    if KV_QUANT == 0:
        return tl.load(cache_ptr + rows[:, None] + offs_d[None, :], mask=mask, other=0.0)
    scale = tl.load(scale_ptr + scale_rows, mask=mask_n, other=0.0).to(tl.float32)  # [BN]
    if KV_QUANT == 1:
        codes = tl.load(cache_ptr + rows[:, None] + offs_d[None, :], mask=mask, other=0)
        return codes.to(tl.float32) * scale[:, None]
    byte = (offs_d // 16) * 8 + offs_d % 8  # element d's byte within the row
    shift = ((offs_d % 16) // 8) * 4  # low nibble for the chunk's first 8 elements
    packed = tl.load(cache_ptr + rows[:, None] + byte[None, :], mask=mask, other=0).to(tl.int32)
    minimum = tl.load(scale_ptr + scale_rows + 1, mask=mask_n, other=0.0).to(tl.float32)
    codes = (packed >> shift[None, :]) & 15
    return codes.to(tl.float32) * scale[:, None] + minimum[:, None]


def dot_config(cache_dtype: torch.dtype, kernel: object) -> tuple[tl.dtype, str]:
    """(operand dtype, input precision) for the kernels' tl.dot calls.

    Operands are the cache dtype, so K/V tiles feed the tensor cores without conversion. Two
    exceptions: fp32 would silently drop to tf32, so it asks for "ieee" to stay exact like the
    reference; and the interpreter's tl.dot mishandles bf16 (it multiplies the raw bits), so
    under the interpreter bf16 tiles are upcast to fp32 first.
    """
    if cache_dtype == torch.bfloat16 and is_interpreted(kernel) or cache_dtype in KV_QUANT_CODES:
        return tl.float32, "ieee"  # quantized rows arrive as float32 (codes times scales)
    if cache_dtype not in _TL_DTYPES:
        raise TypeError(f"unsupported KV cache dtype {cache_dtype}")
    dtype = _TL_DTYPES[cache_dtype]
    return dtype, "ieee" if dtype == tl.float32 else "tf32"


def sm_count(device: torch.device) -> int:
    """Streaming multiprocessors of `device` (the split heuristics size grids by it)."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return _cuda_sm_count(index)
    return 4  # interpreter: a handful of programs is plenty


@functools.cache
def _cuda_sm_count(index: int) -> int:  # queried once per device, not once per kernel call
    return torch.cuda.get_device_properties(index).multi_processor_count


def cdiv(a: int, b: int) -> int:
    return triton.cdiv(a, b)
