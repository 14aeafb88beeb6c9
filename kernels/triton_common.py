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


def dot_config(cache_dtype: torch.dtype, kernel: object) -> tuple[tl.dtype, str]:
    """(operand dtype, input precision) for the kernels' tl.dot calls.

    Operands are the cache dtype, so K/V tiles feed the tensor cores without conversion. Two
    exceptions: fp32 would silently drop to tf32, so it asks for "ieee" to stay exact like the
    reference; and the interpreter's tl.dot mishandles bf16 (it multiplies the raw bits), so
    under the interpreter bf16 tiles are upcast to fp32 first.
    """
    if cache_dtype == torch.bfloat16 and is_interpreted(kernel):
        return tl.float32, "ieee"
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
