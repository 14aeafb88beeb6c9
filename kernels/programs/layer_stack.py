"""Every decoder layer of one step in one native call (cpu_stack.c), for a model with float32
activations whose linears are float32 panel linears or weight-only int8 / int4 `QuantLinear`s on
cpu_quant.c, over a float32 paged KV cache.

The per-op path (backends/local/model/llama.py) makes about ten Python calls a layer; right after a
linear has streamed its weights through the caches, each runs cold (50-150 us on a 2-core VM).
Here the same kernels run in the same order from one call, so the result has the same bits:
`NativeStack` only sequences cpu_fused.c's norms, RoPE and SwiGLU, cpu_gemm.c's and cpu_quant.c's
linears and cpu_attention.c's decode and prefill attention. Anything it does not take (another
dtype, a quantized cache, int8-a8 linears, a head size the attention kernels do not take) builds no
stack (`misfit` says why), and a step it cannot run returns None: the caller keeps the per-op path.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import torch

from fairgate.kernels.layers.panel_linear import PanelLinear, onednn_block
from fairgate.kernels.layers.quant_linear import QuantLinear
from fairgate.kernels.native import abi
from fairgate.kernels.native.abi import (
    LANES,  # head_dim must be a multiple (the attention kernels' vector width)
)

MAX_HEAD_DIM = 128  # the native prefill attention's limit
_KINDS = {0: "int8", 1: "int4", 2: "int8"}  # cpu_quant.c's kinds (2: int8 on the AMX tile unit)


@dataclass(slots=True)
class StackLayer:
    """One decoder layer's parts as the model holds them. Each linear is a `PanelLinear` (the
    gate/up one built with swiglu=True) or a `QuantLinear` on cpu_quant.c's weight-only kernel
    (its gate/up output then goes through silu_mul, as the per-op MLP does)."""

    input_norm: torch.Tensor  # [hidden]
    qkv: PanelLinear | QuantLinear  # hidden -> (H + 2 Hkv) * D
    o: PanelLinear | QuantLinear  # H * D -> hidden
    post_norm: torch.Tensor  # [hidden]
    gate_up: PanelLinear | QuantLinear  # hidden -> silu(gate) * up, [inter]
    down: PanelLinear | QuantLinear  # inter -> hidden
    q_norm: torch.Tensor | None = None  # [head_dim], Qwen3's per-head norms (both or neither)
    k_norm: torch.Tensor | None = None


@dataclass(slots=True)
class StepRows:
    """A step's rows as the attention kernels take them: the first `num_decodes` rows are decode
    rows (one query token each), the rest the prefill chunks of len(prefill_lens) sequences."""

    cos_sin: torch.Tensor  # [T, 2, head_dim] float32
    slots: torch.Tensor  # [T] int64, each row's cache slot
    num_decodes: int
    decode_tables: torch.Tensor | None  # [num_decodes, W] int32
    decode_lens: torch.Tensor | None  # [num_decodes] int32
    prefill_tables: torch.Tensor | None  # [num_prefills, W] int32
    prefill_starts: torch.Tensor | None  # [num_prefills + 1] int32
    prefill_lens: torch.Tensor | None  # [num_prefills] int32


class NativeStack:
    """`stack(h, kv_caches, rows)` -> [T, hidden] after the final norm, as the per-op layers
    return it (h, the embedded rows [T, hidden], is left as the residual stream); None for a
    step or caches it does not take. `linears` names what its linears run on (for the plan)."""

    def __init__(self, lib: ctypes.CDLL, layers: list[StackLayer], final_norm: torch.Tensor, heads: int,
                 kv_heads: int, head_dim: int, eps: float) -> None:
        self._lib = lib
        self._layers = (abi.Layer * len(layers))()
        self._weights = (abi.StackWeight * (len(layers) * len(abi.STACK_LINEARS)))()
        kinds = set()
        for index, (slot, layer) in enumerate(zip(self._layers, layers, strict=True)):
            for which, name in enumerate(abi.STACK_LINEARS):
                linear = getattr(layer, name)
                kinds.add(_describe(linear))
                setattr(slot, name, _point(linear, self._weights[index * len(abi.STACK_LINEARS) + which]))
                setattr(slot, f"{name}_bias", _ptr(linear.bias))
            slot.input_norm, slot.post_norm = layer.input_norm.data_ptr(), layer.post_norm.data_ptr()
            slot.q_norm, slot.k_norm = _ptr(layer.q_norm), _ptr(layer.k_norm)
        self._keep = (layers, final_norm)  # alive as long as C holds their pointers
        self.linears = ", ".join(sorted(kinds))
        self._quantized = any(isinstance(layer.gate_up, QuantLinear) for layer in layers)
        self.hidden, self.inter = layers[0].qkv.in_features, layers[0].down.in_features
        self._widths = (heads + 2 * kv_heads) * head_dim, heads * head_dim
        fused, attention, gemm = (abi.load(spec) for spec in (abi.FUSED, abi.ATTENTION, abi.GEMM))
        quant = abi.load(abi.QUANT) if "cpu_quant.c" in self.linears else None
        assert fused is not None and attention is not None and gemm is not None  # `misfit` checked
        fns = [abi.address(fused, "rms_norm"), abi.address(fused, "rope_write_kv"),
               abi.address(attention, "paged_decode_attention"), abi.address(attention, "paged_prefill_attention"),
               abi.address(gemm, "exact_linear"), abi.address(gemm, "exact_linear_swiglu"),
               abi.address(fused, "qk_norm")]
        self._model = abi.StackModel(
            len(layers), self.hidden, heads, kv_heads, head_dim, self.inter, 0, onednn_block(self.hidden),
            onednn_block(self._widths[1]), onednn_block(self.inter), eps, head_dim**-0.5, self._layers,
            final_norm.data_ptr(), *fns, self._weights if quant is not None else None,
            0 if quant is None else abi.address(quant, "quant_linear"), abi.address(fused, "silu_mul"),
            abi.address(gemm, "exact_linear_scaled"))
        self._bound: tuple[object, int] = (None, 0)  # the caches the layers point at: (list, first pointer)
        self._scratch = torch.empty(0)

    @classmethod
    def build(cls, layers: list[StackLayer], final_norm: torch.Tensor, heads: int, kv_heads: int, head_dim: int,
              eps: float) -> NativeStack | None:
        """The stack where every part fits the native kernels and they build here, else None."""
        if cls.misfit(layers, final_norm, heads, kv_heads, head_dim) is not None:
            return None
        lib = abi.load(abi.STACK)
        assert lib is not None  # `misfit` checked
        return cls(lib, layers, final_norm, heads, kv_heads, head_dim, eps)

    @staticmethod
    def misfit(layers: list[StackLayer], final_norm: torch.Tensor, heads: int, kv_heads: int,
               head_dim: int) -> str | None:
        """Why these layers cannot run as a stack here (None: they can)."""
        if not layers:
            return "no decoder layers"
        if head_dim % LANES or head_dim > MAX_HEAD_DIM or heads % kv_heads:
            return f"head_dim {head_dim} or {heads} heads over {kv_heads} KV heads do not fit the attention kernels"
        hidden, q_width = layers[0].qkv.in_features, heads * head_dim
        inter = layers[0].down.in_features
        shapes = {"qkv": (hidden, (heads + 2 * kv_heads) * head_dim), "o": (q_width, hidden),
                  "gate_up": (hidden, 2 * inter), "down": (inter, hidden)}
        for layer in layers:
            why = next((w for name in abi.STACK_LINEARS
                        if (w := _linear_misfit(name, getattr(layer, name), shapes[name]))), None)
            if why is not None:
                return why
            if not all(_fits(t, (hidden,)) for t in (layer.input_norm, layer.post_norm)):
                return "a layer norm's weight is not float32 [hidden] on the CPU"
            if (layer.q_norm is None) != (layer.k_norm is None) or not all(
                    _fits(t, (head_dim,)) for t in (layer.q_norm, layer.k_norm) if t is not None):
                return "the q/k norm weights are not both float32 [head_dim] on the CPU"
        if not _fits(final_norm, (hidden,)):
            return "the final norm's weight is not float32 [hidden] on the CPU"
        quantized = any(isinstance(getattr(layer, name), QuantLinear) for layer in layers for name in abi.STACK_LINEARS)
        for spec in (abi.STACK, abi.ATTENTION, abi.FUSED, abi.GEMM, *((abi.QUANT,) if quantized else ())):
            if abi.load(spec) is None:
                return f"{spec.source} did not build ({abi.why_not(spec)})"
        return None

    def __call__(self, h: torch.Tensor, kv_caches: list[tuple[torch.Tensor, ...]], rows: StepRows) -> torch.Tensor | None:
        tokens = h.shape[0]
        if not self._bind(kv_caches) or not _fits(h, (tokens, self.hidden)) or not self._rows_fit(rows, tokens):
            return None
        m = self._model
        qkv_width, q_width = self._widths
        # x, qkv, q, att, act, pending; gate_up for a quantized gate/up projection
        sizes = (self.hidden, qkv_width, q_width, q_width, self.inter, self.hidden, 2 * self.inter if self._quantized else 0)
        need = tokens * sum(sizes)
        if self._scratch.numel() < need:
            self._scratch = torch.empty(need, dtype=torch.float32)
        base, parts = self._scratch.data_ptr(), []
        for width in sizes:
            parts.append(base)
            base += tokens * width * 4
        out = torch.empty(tokens, self.hidden, dtype=torch.float32)
        decodes = rows.num_decodes
        step = abi.StackStep(
            tokens, decodes, 0 if rows.prefill_lens is None else rows.prefill_lens.shape[0],
            h.data_ptr(), out.data_ptr(), rows.cos_sin.data_ptr(), rows.slots.data_ptr(),
            _ptr(rows.decode_tables), _ptr(rows.decode_lens), _stride(rows.decode_tables),
            _ptr(rows.prefill_tables), _ptr(rows.prefill_starts), _ptr(rows.prefill_lens),
            _stride(rows.prefill_tables), *parts[:-1], parts[-1] if self._quantized else None)
        if self._lib.stack_forward(ctypes.byref(m), ctypes.byref(step), torch.get_num_threads()):
            raise MemoryError("stack_forward: no scratch memory for attention")
        return out

    def _rows_fit(self, rows: StepRows, tokens: int) -> bool:
        head_dim = self._model.head_dim
        if not _fits(rows.cos_sin, (tokens, 2, head_dim)) or not _fits(rows.slots, (tokens,), torch.int64):
            return False
        decodes = rows.num_decodes
        if decodes and not (_table(rows.decode_tables, decodes) and _fits(rows.decode_lens, (decodes,), torch.int32)):
            return False
        if decodes == tokens:
            return True
        lens = rows.prefill_lens
        if lens is None or not _fits(lens, (lens.shape[0],), torch.int32) or not _table(rows.prefill_tables, lens.shape[0]):
            return False
        return _fits(rows.prefill_starts, (lens.shape[0] + 1,), torch.int32)

    def _bind(self, kv_caches: list[tuple[torch.Tensor, ...]]) -> bool:
        """Point the layers at these caches (once per list of caches); False when they do not fit
        (not float32 [blocks, block_size, kv_heads, head_dim], or quantized: scales present)."""
        if self._bound[0] is kv_caches and self._bound[1] == kv_caches[0][0].data_ptr():
            return True
        m = self._model
        if len(kv_caches) != m.num_layers:
            return False
        shape = (kv_caches[0][0].shape[1], m.kv_heads, m.head_dim)
        for kv in kv_caches:
            k, v = kv[0], kv[1]
            if any(t is not None for t in kv[2:]) or not _fits(k, (k.shape[0], *shape)) or not _fits(v, tuple(k.shape)):
                return False
        for slot, kv in zip(self._layers, kv_caches, strict=True):
            slot.k_cache, slot.v_cache = kv[0].data_ptr(), kv[1].data_ptr()
        m.block_size = shape[0]
        self._bound = (kv_caches, kv_caches[0][0].data_ptr())
        return True


def _linear_misfit(name: str, linear: object, shape: tuple[int, int]) -> str | None:
    """Why one linear cannot run in the stack (None: it can)."""
    if type(linear) is PanelLinear:
        if linear.fused_swiglu != (name == "gate_up"):
            return ("the gate/up panels keep their own SwiGLU" if name == "gate_up"
                    else f"the {name} panels apply a SwiGLU")
    elif type(linear) is QuantLinear:
        if linear.cpu_kind is None:
            return f"{linear.method.name} linears run per op (not on cpu_quant.c's weight-only kernel)"
    else:
        return f"{type(linear).__name__} linears run per op"
    if (linear.in_features, linear.out_features) != shape:
        return f"the {name} linear is [{linear.in_features} -> {linear.out_features}], not {shape}"
    return None


def _describe(linear: PanelLinear | QuantLinear) -> str:
    if isinstance(linear, QuantLinear):
        wide = linear.panels_f32
        also = "" if wide is None else f", from {wide.rows} rows on float32 panels of them (cpu_gemm.c)"
        if linear.tile_unit:
            also = ", on its AMX tile unit path at every row count"
        return f"{_KINDS[linear.cpu_kind or 0]} on cpu_quant.c{also} (a gate/up one then silu_mul on cpu_fused.c)"
    return "float32 panels on cpu_gemm.c"


def _point(linear: PanelLinear | QuantLinear, weight: abi.StackWeight) -> int:
    """The linear's weight pointer for fg_layer; a quantized one's scales go to `weight`."""
    if isinstance(linear, PanelLinear):
        return linear.packed.data_ptr()
    weight.scale, weight.minimum = linear.scale.data_ptr(), _ptr(linear.minimum)
    weight.kind, weight.group = linear.cpu_kind or 0, linear.method.group
    if linear.panels_f32 is not None:
        weight.panels, weight.panel_rows = linear.panels_f32.panels.data_ptr(), linear.panels_f32.rows
    return linear.panels.data_ptr()


def _fits(t: torch.Tensor | None, shape: tuple[int, ...], dtype: torch.dtype = torch.float32) -> bool:
    return (t is not None and t.dtype == dtype and t.device.type == "cpu" and tuple(t.shape) == shape
            and t.is_contiguous())


def _table(t: torch.Tensor | None, rows: int) -> bool:
    return (t is not None and t.dtype == torch.int32 and t.device.type == "cpu" and t.dim() == 2
            and t.shape[0] == rows and t.stride(1) == 1)


def _ptr(t: torch.Tensor | None) -> int:
    return 0 if t is None else t.data_ptr()


def _stride(t: torch.Tensor | None) -> int:
    return 0 if t is None else t.stride(0)
