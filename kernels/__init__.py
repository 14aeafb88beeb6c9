"""Kernels for the paged engine. The engine calls only these dispatch functions.

Which implementation runs is chosen per call from FAIRGATE_KERNELS:
- `auto` (default): Triton for CUDA tensors when triton imports; on the CPU the native kernels
  (`cpu_ops`: cpu_attention.c; `cpu_fused`: cpu_fused.c's RMSNorm, SwiGLU and argmax; built with
  the system C compiler at first use) when they build;
  the torch reference otherwise;
- `native`: always the native CPU kernels (an error when they cannot build);
- `triton`: always Triton (CPU tensors need TRITON_INTERPRET=1 set before the first Triton call);
- `reference`: always the torch reference.
Triton and the native library load lazily, on the first call that wants them: CPU-only
processes never pay for triton, and TRITON_INTERPRET set by a test's conftest still takes effect.

Tests: `python -m pytest -q tests/kernels` (Triton under the interpreter on CPU, real kernels on
CUDA). GPU check and timings: `python bench/kernels_gpu.py`.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
from types import ModuleType

import torch

from fairgate.kernels import reference

log = logging.getLogger(__name__)

KERNEL_MODES = ("auto", "native", "triton", "reference")


def kernel_mode() -> str:
    """The FAIRGATE_KERNELS setting, validated."""
    mode = os.environ.get("FAIRGATE_KERNELS", "auto").strip().lower() or "auto"
    if mode not in KERNEL_MODES:
        raise ValueError(f"FAIRGATE_KERNELS={mode!r}; expected one of {', '.join(KERNEL_MODES)}")
    return mode


@functools.cache
def _load_triton() -> tuple[ModuleType | None, str | None]:
    """Import the Triton kernels once; (module, None) or (None, why not)."""
    try:
        triton_ops = importlib.import_module("fairgate.kernels.triton_ops")
    except Exception as exc:  # noqa: BLE001 - any import failure means "use the torch path"
        why = f"{type(exc).__name__}: {exc}"
        log.warning("triton kernels unavailable (%s); using the torch reference kernels", why)
        return None, why
    return triton_ops, None


def triton_available() -> bool:
    """Whether the Triton kernels import here (imports triton on first call)."""
    return _load_triton()[0] is not None


@functools.cache
def _load_native() -> tuple[ModuleType | None, str | None]:
    """The native CPU kernel set once; (module, None) or (None, why not)."""
    from fairgate.kernels import cpu_native

    if cpu_native.load() is None:
        return None, "the native CPU kernels did not build (see the warning above)"
    return importlib.import_module("fairgate.kernels.cpu_ops"), None


def _impl(t: torch.Tensor) -> ModuleType:
    mode = kernel_mode()
    if mode == "reference":
        return reference
    if mode == "native" or (mode == "auto" and not t.is_cuda):
        ops, why = _load_native()
        if ops is not None:
            return ops
        if mode == "native":
            raise RuntimeError(f"FAIRGATE_KERNELS=native but {why}")
        return reference
    ops, why = _load_triton()
    if ops is not None:
        return ops
    if mode == "triton":
        raise RuntimeError(f"FAIRGATE_KERNELS=triton but the Triton kernels cannot load: {why}")
    return reference  # auto on CUDA without triton: warned once by _load_triton


def write_kv(key, value, k_cache, v_cache, slot_mapping, k_scale=None, v_scale=None) -> None:
    """See `kernels.reference.write_kv` (scales only for a quantized cache, `kernels.kv_quant`)."""
    if k_scale is None:
        _impl(key).write_kv(key, value, k_cache, v_cache, slot_mapping)
    else:
        _impl(key).write_kv(key, value, k_cache, v_cache, slot_mapping, k_scale, v_scale)


def paged_decode_attention(query, k_cache, v_cache, block_tables, seq_lens, scale, max_seq_len=None,
                           k_scale=None, v_scale=None):
    """See `kernels.reference.paged_decode_attention`."""
    impl = _impl(query)
    if k_scale is None:
        return impl.paged_decode_attention(query, k_cache, v_cache, block_tables, seq_lens, scale, max_seq_len)
    return impl.paged_decode_attention(
        query, k_cache, v_cache, block_tables, seq_lens, scale, max_seq_len, k_scale, v_scale
    )


def paged_prefill_attention(query, k_cache, v_cache, block_tables, query_start_loc, seq_lens, scale,
                            k_scale=None, v_scale=None):
    """See `kernels.reference.paged_prefill_attention`."""
    impl = _impl(query)
    if k_scale is None:
        return impl.paged_prefill_attention(query, k_cache, v_cache, block_tables, query_start_loc, seq_lens, scale)
    return impl.paged_prefill_attention(
        query, k_cache, v_cache, block_tables, query_start_loc, seq_lens, scale, k_scale, v_scale
    )


def fused_ops(t: torch.Tensor) -> ModuleType:
    """The module `rms_norm`, `silu_mul` and `argmax` dispatch to for tensors like `t` under
    the current mode: a caller making thousands of tiny calls binds its functions once."""
    return _fused(t)


def _fused(t: torch.Tensor) -> ModuleType:
    """The fused elementwise ops: native on the CPU where the native kernels are chosen (they
    check dtype and layout themselves), the torch reference everywhere else."""
    if _impl(t).__name__ != "fairgate.kernels.cpu_ops":
        return reference
    from fairgate.kernels import cpu_fused

    return cpu_fused


def rope_write_kv(qkv: torch.Tensor, cos_sin: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                  slot_mapping: torch.Tensor, num_heads: int, k_scale: torch.Tensor | None = None,
                  v_scale: torch.Tensor | None = None) -> torch.Tensor:
    """See `kernels.reference.rope_write_kv`: one native pass on the CPU for a float32 cache;
    elsewhere the torch rotation, then `write_kv` on the device's path."""
    fused = _fused(qkv)
    if k_scale is None and fused is not reference:
        native_q: torch.Tensor | None = fused.rope_write_kv(qkv, cos_sin, k_cache, v_cache, slot_mapping, num_heads)
        if native_q is not None:
            return native_q
    q, k, v = reference.rotate_qkv(qkv, cos_sin, num_heads, k_cache.shape[2])
    write_kv(k, v, k_cache, v_cache, slot_mapping, k_scale, v_scale)
    return q


def rms_norm(x, weight, eps, residual=None):
    """See `kernels.reference.rms_norm`."""
    return _fused(x).rms_norm(x, weight, eps, residual)


def silu_mul(gate_up):
    """See `kernels.reference.silu_mul`."""
    return _fused(gate_up).silu_mul(gate_up)


def argmax(logits):
    """See `kernels.reference.argmax`."""
    return _fused(logits).argmax(logits)


GEMM_CHOICES = ("auto", "native", "onednn", "torch")


def pack_linears(model: torch.nn.Module, device: torch.device | str, gemm: str = "auto") -> int:
    """Swap a CPU model's float32 linears for pre-packed ones (`kernels.cpu_linear`); return how
    many were packed.

    `gemm`: "auto" packs where the native CPU path is chosen (0 on CUDA or
    FAIRGATE_KERNELS=reference): native panel linears (cpu_gemm.c, oneDNN's bits), else oneDNN;
    "native" / "onednn" always pack on the CPU with that kernel (an error where it cannot run);
    "torch" keeps `F.linear` (MKL on x86), for A/B runs."""
    if gemm not in GEMM_CHOICES:
        raise ValueError(f"gemm={gemm!r}; expected one of {', '.join(GEMM_CHOICES)}")
    on_cpu = torch.device(device).type == "cpu"
    if gemm == "torch" or (gemm == "auto" and (not on_cpu or kernel_mode() not in ("auto", "native"))):
        return 0
    if not on_cpu:
        raise ValueError(f"gemm={gemm} runs on the CPU only")
    from fairgate.kernels.cpu_linear import pack_linears as pack

    return pack(model, required=gemm != "auto", kind=gemm)


def native_stack(layers, final_norm: torch.Tensor, heads: int, kv_heads: int, head_dim: int, eps: float):
    """A `kernels.cpu_stack.NativeStack` (every decoder layer of a step in one native call) where
    the native CPU kernels are chosen and every part fits them, else None (the per-op path).
    `layers`: `kernels.cpu_stack.StackLayer`s."""
    if final_norm.device.type != "cpu" or kernel_mode() not in ("auto", "native") or _load_native()[0] is None:
        return None
    from fairgate.kernels.cpu_stack import NativeStack

    return NativeStack.build(layers, final_norm, heads, kv_heads, head_dim, eps)


def greedy_head(lm_head: torch.nn.Module):
    """A `kernels.cpu_greedy.GreedyHead` (greedy tokens without every float32 logit, the same
    tokens) for a float32 panel LM head where the native CPU kernels are chosen, else None."""
    from fairgate.kernels.cpu_linear import PanelLinear

    if type(lm_head) is not PanelLinear or kernel_mode() not in ("auto", "native") or _load_native()[0] is None:
        return None
    from fairgate.kernels.cpu_greedy import GreedyHead

    head = GreedyHead.build(lm_head)
    if head is not None and head.screen == "fma":  # a bfloat16 dot product or AMX: the screen wins outright
        head.calibrate()
    return head


def describe_backend(device: torch.device | str) -> str:
    """One line for the startup log: which kernel path a device will use."""
    mode = kernel_mode()
    is_cuda = torch.device(device).type == "cuda"
    if mode == "reference":
        return "torch reference kernels" + (" (FAIRGATE_KERNELS=reference)" if is_cuda else "")
    if mode == "native" or (mode == "auto" and not is_cuda):
        ops, why = _load_native()
        if ops is not None:
            return "native CPU kernels"
        if mode == "native":
            return f"none: FAIRGATE_KERNELS=native but {why}"
        return f"torch reference kernels ({why})"
    ops, why = _load_triton()
    if ops is None and mode == "triton":
        return f"none: FAIRGATE_KERNELS=triton but triton is unavailable ({why})"
    if ops is None:
        return f"torch reference kernels (triton unavailable: {why})"
    return "triton kernels" + ("" if is_cuda else " (forced on CPU: FAIRGATE_KERNELS=triton)")


def weight_only_linear(x: torch.Tensor, qw, bias: torch.Tensor | None = None) -> torch.Tensor:
    """See `kernels.reference.quant_linear` (QuantLinear's path off the native CPU kernel)."""
    impl = _impl(x)
    fn = getattr(impl, "quant_linear", None)
    return (fn or reference.quant_linear)(x, qw, bias)


def native_quant_linears(device: torch.device | str) -> bool:
    """Whether QuantLinear layers on `device` run the native CPU kernel (FAIRGATE_KERNELS allowing)."""
    return torch.device(device).type == "cpu" and kernel_mode() in ("auto", "native")
