"""The kernel plan: which implementation runs each operation of the engine, and why.

Chosen once, when a model runner starts, from FAIRGATE_KERNELS (read then, not per call), the
device and what built and loaded here; logged, and kept by the runner, whose model calls the
plan's dispatch methods. FAIRGATE_KERNELS:
- `auto` (default): Triton on CUDA when triton imports; on the CPU the native kernels (built with
  the system C compiler at first use) where they build; the torch reference otherwise;
- `native`: always the native CPU kernels (an error, at plan time, when they cannot build);
- `triton`: always Triton (CPU tensors need TRITON_INTERPRET=1 set before the first Triton import);
- `reference`: always the torch reference.
Triton is imported only by a plan that wants it: CPU-only processes never pay for it.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import logging
import os
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

import torch

from fairgate.kernels.native import abi
from fairgate.kernels.ops import cpu_fused, cpu_ops, reference

if TYPE_CHECKING:
    from fairgate.kernels.layers.greedy_head import GreedyHead
    from fairgate.kernels.layers.quant_linear import QuantLinear
    from fairgate.kernels.ops.quant_format import QuantizedWeight
    from fairgate.kernels.programs.draft_round import DecodeRound, LayerWeights
    from fairgate.kernels.programs.layer_stack import NativeStack, StackLayer

log = logging.getLogger(__name__)

KERNEL_MODES = ("auto", "native", "triton", "reference")
GEMM_CHOICES = ("auto", "native", "onednn", "torch")
# The operations a plan names, in the order it logs them.
OPERATIONS = ("kv_write", "decode_attention", "prefill_attention", "fused", "dense_linears", "quant_linears",
              "layer_stack", "greedy_head", "draft_round")


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
        triton_ops = importlib.import_module("fairgate.kernels.triton.ops")
    except Exception as exc:  # noqa: BLE001 - any import failure means "use the torch path"
        why = f"{type(exc).__name__}: {exc}"
        log.warning("triton kernels unavailable (%s); using the torch reference kernels", why)
        return None, why
    return triton_ops, None


def _load_native() -> tuple[ModuleType | None, str | None]:
    """The native CPU kernel set; (module, None) or (None, why not)."""
    if abi.load(abi.ATTENTION) is None:
        return None, f"the native CPU kernels did not build ({abi.why_not(abi.ATTENTION)})"
    return cpu_ops, None


@dataclass(frozen=True, slots=True)
class Choice:
    """What runs one operation, and why."""

    impl: str  # "native", "triton", "reference", "panel", "onednn", "torch", "per-op", "logits"
    why: str

    def __str__(self) -> str:
        return f"{self.impl}: {self.why}"


@dataclass(frozen=True, slots=True)
class KernelPlan:
    """The implementation of each kernel operation for one runner (`choose` builds it).

    The dispatch methods (`write_kv` ... `weight_only_linear`) have the signatures of
    `kernels.ops.reference`; the builders (`pack_linears` ... `draft_round`) swap layer objects
    and whole-model programs in where this plan runs them and return what they built."""

    mode: str  # FAIRGATE_KERNELS, read once
    device: str  # the runner's device type: "cpu" or "cuda"
    gemm: str  # the runner's `gemm` option (GEMM_CHOICES)
    ops: ModuleType  # write_kv and the paged attention: ops.cpu_ops, triton.ops or ops.reference
    fused: ModuleType  # rms_norm, silu_mul, argmax, rope_write_kv: ops.cpu_fused or ops.reference
    native: bool  # the native CPU layers and programs may run (auto/native on the CPU)
    choices: tuple[tuple[str, Choice], ...]  # (operation, choice) in OPERATIONS order

    @classmethod
    def choose(cls, device: torch.device | str = "cpu", gemm: str = "auto", mode: str | None = None) -> KernelPlan:
        """The plan for a runner on `device` (`mode`: FAIRGATE_KERNELS when None). Raises where
        the mode or `gemm` asks for something that cannot run here."""
        from fairgate.kernels.choices import choose

        mode = kernel_mode() if mode is None else mode
        if mode not in KERNEL_MODES:
            raise ValueError(f"FAIRGATE_KERNELS={mode!r}; expected one of {', '.join(KERNEL_MODES)}")
        if gemm not in GEMM_CHOICES:
            raise ValueError(f"gemm={gemm!r}; expected one of {', '.join(GEMM_CHOICES)}")
        kind = torch.device(device).type
        if gemm in ("native", "onednn") and kind != "cpu":
            raise ValueError(f"gemm={gemm} runs on the CPU only")
        return choose(cls, mode, kind, gemm)

    # ---- what the plan says -------------------------------------------------------------------

    def choice(self, operation: str) -> Choice:
        return dict(self.choices)[operation]

    def describe(self) -> dict[str, str]:
        """{operation: "impl: why"}, in OPERATIONS order (for the startup log and an endpoint)."""
        return {op: str(choice) for op, choice in self.choices}

    @property
    def summary(self) -> str:
        """One phrase for the whole plan: "native CPU kernels", "triton kernels", "torch reference kernels (...)"."""
        if self.ops is cpu_ops:
            return "native CPU kernels"
        if self.ops is reference:
            return f"torch reference kernels ({self.choice('decode_attention').why})"
        return "triton kernels" + ("" if self.device == "cuda" else " (forced on CPU: FAIRGATE_KERNELS=triton)")

    def log_lines(self) -> list[str]:
        """The plan as the runner logs it: a heading, then one line per operation."""
        head = f"kernel plan on {self.device} (FAIRGATE_KERNELS={self.mode}, gemm={self.gemm}): {self.summary}"
        return [head, *(f"  {op:<17} {choice}" for op, choice in self.choices)]

    def settled(self, stack: NativeStack | None, head: GreedyHead | None, stack_why: str | None = None,
                quant: Choice | None = None) -> KernelPlan:
        """This plan with what the model took: the layer stack and greedy head it could not use
        recorded as not running, and why (`stack_why`: the model's own reason, if it has one);
        `quant`: what `quant_panels` chose."""
        choices = dict(self.choices)
        if quant is not None:
            choices["quant_linears"] = Choice(quant.impl, f"{choices['quant_linears'].why}; {quant.why}")
        if stack is None and choices["layer_stack"].impl == "native":
            choices["layer_stack"] = Choice("per-op", stack_why or "this model's layers do not fit the native stack")
        elif stack is not None:  # which kernels its linears run on: float32 panels, int8 / int4 codes
            choices["layer_stack"] = Choice("native", f"{choices['layer_stack'].why}; linears: {stack.linears}")
        if head is None and choices["greedy_head"].impl == "native":
            choices["greedy_head"] = Choice("logits", "this LM head does not fit the screen")
        return dataclasses.replace(self, choices=tuple(choices.items()))

    # ---- per-operation dispatch -----------------------------------------------------------------

    def write_kv(self, key, value, k_cache, v_cache, slot_mapping, k_scale=None, v_scale=None) -> None:
        """See `kernels.ops.reference.write_kv` (scales only for a quantized cache, `kernels.ops.kv_quant`)."""
        if k_scale is None:
            self.ops.write_kv(key, value, k_cache, v_cache, slot_mapping)
        else:
            self.ops.write_kv(key, value, k_cache, v_cache, slot_mapping, k_scale, v_scale)

    def paged_decode_attention(self, query, k_cache, v_cache, block_tables, seq_lens, scale, max_seq_len=None,
                               k_scale=None, v_scale=None, window=None):
        """See `kernels.ops.reference.paged_decode_attention`. A `window` (Gemma 3's sliding
        layers) runs the native CPU kernel where the plan runs it, else the torch reference (the
        Triton kernels do not window)."""
        if window is not None:
            ops = self.ops if self.ops is cpu_ops else reference
            return ops.paged_decode_attention(query, k_cache, v_cache, block_tables, seq_lens, scale,
                                              max_seq_len, k_scale, v_scale, window)
        if k_scale is None:
            return self.ops.paged_decode_attention(query, k_cache, v_cache, block_tables, seq_lens, scale, max_seq_len)
        return self.ops.paged_decode_attention(query, k_cache, v_cache, block_tables, seq_lens, scale, max_seq_len,
                                               k_scale, v_scale)

    def paged_prefill_attention(self, query, k_cache, v_cache, block_tables, query_start_loc, seq_lens, scale,
                                k_scale=None, v_scale=None, window=None):
        """See `kernels.ops.reference.paged_prefill_attention` (a `window`: as for decode)."""
        if window is not None:
            ops = self.ops if self.ops is cpu_ops else reference
            return ops.paged_prefill_attention(query, k_cache, v_cache, block_tables, query_start_loc,
                                                     seq_lens, scale, k_scale, v_scale, window)
        if k_scale is None:
            return self.ops.paged_prefill_attention(query, k_cache, v_cache, block_tables, query_start_loc,
                                                    seq_lens, scale)
        return self.ops.paged_prefill_attention(query, k_cache, v_cache, block_tables, query_start_loc, seq_lens,
                                                scale, k_scale, v_scale)

    def rope_write_kv(self, qkv: torch.Tensor, cos_sin: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                      slot_mapping: torch.Tensor, num_heads: int, k_scale: torch.Tensor | None = None,
                      v_scale: torch.Tensor | None = None) -> torch.Tensor:
        """See `kernels.ops.reference.rope_write_kv`: one native pass on the CPU for a float32
        cache; elsewhere the torch rotation, then `write_kv` on this plan's path."""
        if k_scale is None and self.fused is cpu_fused:
            native_q = cpu_fused.rope_write_kv(qkv, cos_sin, k_cache, v_cache, slot_mapping, num_heads)
            if native_q is not None:
                return native_q
        q, k, v = reference.rotate_qkv(qkv, cos_sin, num_heads, k_cache.shape[2])
        self.write_kv(k, v, k_cache, v_cache, slot_mapping, k_scale, v_scale)
        return q

    def rms_norm(self, x, weight, eps, residual=None):
        """See `kernels.ops.reference.rms_norm`."""
        return self.fused.rms_norm(x, weight, eps, residual)

    def qk_norm(self, qkv, q_weight, k_weight, eps, num_heads, num_kv_heads):
        """See `kernels.ops.reference.qk_norm` (Qwen3's per-head q/k norm, in place)."""
        return self.fused.qk_norm(qkv, q_weight, k_weight, eps, num_heads, num_kv_heads)

    def silu_mul(self, gate_up):
        """See `kernels.ops.reference.silu_mul`."""
        return self.fused.silu_mul(gate_up)

    def gelu_tanh_mul(self, gate_up):
        """See `kernels.ops.reference.gelu_tanh_mul` (Gemma's MLP; torch on every device)."""
        return reference.gelu_tanh_mul(gate_up)

    def argmax(self, logits):
        """See `kernels.ops.reference.argmax`."""
        return self.fused.argmax(logits)

    def weight_only_linear(self, x: torch.Tensor, qw, bias: torch.Tensor | None = None) -> torch.Tensor:
        """See `kernels.ops.reference.quant_linear` (QuantLinear's path off the native CPU kernel)."""
        fn = getattr(self.ops, "quant_linear", None)
        return (fn or reference.quant_linear)(x, qw, bias)

    # ---- layers and programs swapped in ---------------------------------------------------------

    def pack_linears(self, model: torch.nn.Module) -> int:
        """Swap the model's float32 CPU linears for pre-packed ones (`kernels.layers.panel_linear`)
        as `dense_linears` says; return how many were packed (0: `F.linear` stays)."""
        if self.choice("dense_linears").impl == "torch":
            return 0
        from fairgate.kernels.layers.panel_linear import pack_linears

        return pack_linears(model, required=self.gemm != "auto", kind=self.gemm)

    @property
    def native_quant_linears(self) -> bool:
        """Whether QuantLinear layers run the native CPU kernels (their codes stay on the CPU)."""
        return self.native

    def quant_linear(self, qw: QuantizedWeight, bias: torch.Tensor | None) -> QuantLinear:
        """A quantized linear layer on this plan's kernels."""
        from fairgate.kernels.layers.quant_linear import QuantLinear

        return QuantLinear(qw, bias, self.native, self.weight_only_linear)

    def quant_panels(self, model: torch.nn.Module) -> Choice | None:
        """Float32 panels for the model's weight-only int8 / int4 linears, for the steps of many
        rows where they measure faster here (kernels/choices.py `quant_panels`, at the runner's
        start); what `settled` records, None where the model has no such linears."""
        from fairgate.kernels.choices import quant_panels
        from fairgate.kernels.layers.quant_linear import QuantLinear

        layers = getattr(model, "layers", None)
        if not isinstance(layers, torch.nn.ModuleList):
            return None
        return quant_panels([[m for m in layer.modules() if isinstance(m, QuantLinear)] for layer in layers],
                            self.native)

    def native_stack(self, layers: list[StackLayer], final_norm: torch.Tensor, heads: int, kv_heads: int,
                     head_dim: int, eps: float) -> NativeStack | None:
        """A `NativeStack` (every decoder layer of a step in one native call) where this plan runs
        it and every part fits, else None (the per-op path)."""
        if self.choice("layer_stack").impl != "native" or final_norm.device.type != "cpu":
            return None
        from fairgate.kernels.programs.layer_stack import NativeStack

        return NativeStack.build(layers, final_norm, heads, kv_heads, head_dim, eps)

    def greedy_head(self, lm_head: torch.nn.Module) -> GreedyHead | None:
        """A `GreedyHead` (greedy tokens without every float32 logit, the same tokens) for a
        float32 panel LM head where this plan runs it, else None."""
        from fairgate.kernels.layers.greedy_head import GreedyHead
        from fairgate.kernels.layers.panel_linear import PanelLinear

        if type(lm_head) is not PanelLinear or self.choice("greedy_head").impl != "native":
            return None
        head = GreedyHead.build(lm_head)
        if head is not None and head.screen == "fma":  # a bfloat16 dot product or AMX: the screen wins outright
            head.calibrate()
        return head

    def draft_round(self, embed: torch.Tensor, final_norm: torch.Tensor, cos_sin: torch.Tensor | None,
                    layers: list[LayerWeights], heads: int, kv_heads: int, head_dim: int,
                    eps: float) -> DecodeRound | None:
        """A draft model's decode round in one native call where this plan runs it, else None."""
        if cos_sin is None or embed.device.type != "cpu" or not self.native:
            return None
        from fairgate.kernels.programs.draft_round import DecodeRound

        return DecodeRound.build(embed, final_norm, cos_sin, layers, heads, kv_heads, head_dim, eps)

