"""Linear layers with weights packed once at load: in panels for the native kernel (cpu_gemm.c,
`PanelLinear`, the default), or in the layout of the CPU's matmul library (oneDNN, `PackedLinear`).

`F.linear` on the CPU repacks the weight into the GEMM library's blocked layout on every call.
For a prefill of hundreds of tokens that cost hides behind the arithmetic; for a decode step
of 4 to 128 tokens it is most of the time (measured here on a 110M Llama, two cores: the
layers' matmuls run 1.4-1.8x faster packed at those sizes, the same at 512 tokens). Packing is a
module swap done once after loading, like a weight-only quantization step; the unpacked
weight is dropped, so memory does not grow.

A row's result must not depend on how many rows share the call: speculative verification runs
k + 1 rows where plain decoding runs one, and greedy output has to be the same bits. oneDNN keeps
that for any batch of two or more rows, but for a single row it takes another kernel when K is
large (here: K > 1024, e.g. a down projection), whose sums round differently. Each layer checks
this once at packing time and, where it differs, runs a lone row as two.

`PanelLinear` gives oneDNN's bits for any number of rows, by construction (cpu_gemm.c sums in
oneDNN's order: blocks of `onednn_block(K)` inputs), and at a decode step's few rows it streams
the weights at up to twice oneDNN's rate; at hundreds of rows the two run at the same speed.
A `PanelLinear` built with `swiglu=True` (what `pack_linears` does for a `gate_up_proj`) returns
silu(gate) * up itself: the [rows, 2 I] projection is never written out and read back.
"""

from __future__ import annotations

import ctypes
import functools
import logging

import torch
import torch.nn.functional as F
from torch import nn

from fairgate.kernels.native import abi, hugepages
from fairgate.kernels.native.abi import LANES, PANEL  # a panel linear's width: a multiple of LANES

log = logging.getLogger(__name__)


# The decoder's fused [gate; up] projection: a panel linear of this name applies SwiGLU itself
# (its module then has `fused_swiglu` set; backends/local/model/llama.py's MLP looks for it).
SWIGLU_NAME = "gate_up_proj"

# oneDNN picks its blocked layout for a typical batch; any batch size runs on it.
PACK_BATCH_HINT = 64


@functools.cache
def packing_available() -> bool:
    """Whether this torch build can pack and run oneDNN linears here (checked on a tiny case)."""
    try:
        if not torch.backends.mkldnn.is_available():
            return False
        gen = torch.Generator().manual_seed(0)
        w, x, b = (torch.randn(*s, generator=gen) for s in ((24, 16), (3, 16), (24,)))
        packed = torch.ops.mkldnn._reorder_linear_weight(w, PACK_BATCH_HINT)
        out = torch.ops.mkldnn._linear_pointwise(x, packed, b, "none", [], "")
        return bool(torch.allclose(out, F.linear(x, w, b), atol=1e-5, rtol=1e-5))
    except Exception as exc:  # noqa: BLE001 - any failure means "keep F.linear"
        log.warning("packed CPU linears unavailable (%s: %s)", type(exc).__name__, exc)
        return False


class PackedLinear(nn.Module):
    """y = x W^T + b for float32 CPU tensors, W held in oneDNN's packed layout.

    Takes x [..., in_features] and returns [..., out_features]; results match `F.linear`
    to float32 rounding (the summation order differs).
    """

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        weight = linear.weight.detach()
        if weight.device.type != "cpu" or weight.dtype != torch.float32:
            raise ValueError("PackedLinear takes float32 CPU weights")
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.contiguous(), PACK_BATCH_HINT)
        self.bias = None if linear.bias is None else linear.bias.detach().contiguous()
        self.pad_single_row = False
        self.pad_single_row = self._single_row_differs()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pad_single_row and x.numel() == self.in_features:
            two = x.reshape(1, self.in_features).expand(2, -1).contiguous()  # [2, K]
            return self._matmul(two)[:1].view(*x.shape[:-1], self.out_features)
        return self._matmul(x.contiguous())

    def _matmul(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")

    def _single_row_differs(self) -> bool:
        """Whether a row computed alone differs in any bit from the same row in a batch."""
        gen = torch.Generator().manual_seed(0)
        rows = torch.randn(3, self.in_features, generator=gen)  # [3, K]
        batch = self._matmul(rows)
        return not all(torch.equal(self._matmul(rows[i : i + 1].contiguous())[0], batch[i]) for i in range(3))

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def load_gemm() -> ctypes.CDLL | None:
    """The built native/cpu_gemm.c, or None (logged once) where it cannot be built or loaded here."""
    return abi.load(abi.GEMM)


@functools.cache
def onednn_block(in_features: int) -> int:
    """How many inputs oneDNN sums in one FMA chain before it adds the chain to the output.

    It depends on the CPU: torch 2.13's oneDNN takes 512 for K <= 1024 and 1024 above with
    AVX-512, and 1024 at any K with AVX2 only (a Zen 3 box). So it is found here by comparing
    bits, once per K: a probe layer through oneDNN against cpu_gemm.c at each candidate block,
    the first that gives the same bits (any block >= K is the same single chain). Where oneDNN
    or the native library is missing there is nothing to match, and the AVX-512 rule stands.
    """
    rule = 512 if in_features <= 1024 else 1024
    lib = load_gemm()
    if lib is None or not packing_available():
        return rule
    gen = torch.Generator().manual_seed(in_features)
    rows, outputs = 7, 32
    weight = torch.randn(outputs, in_features, generator=gen)
    x = torch.randn(rows, in_features, generator=gen)
    expected = torch.ops.mkldnn._linear_pointwise(
        x, torch.ops.mkldnn._reorder_linear_weight(weight, PACK_BATCH_HINT), None, "none", [], "")
    panels, out = pack_panels(weight), torch.empty(rows, outputs)
    candidates = sorted({c for c in (64, 128, 256, 384, 512, 768, 1024, 2048, 4096) if c < in_features} | {in_features})
    for block in candidates:
        lib.exact_linear(x.data_ptr(), rows, in_features, panels.data_ptr(), outputs, 0, out.data_ptr(), block, 1)
        if torch.equal(out, expected):
            return block
    log.warning("oneDNN's summation blocks for K=%d not found; panel linears will not give its bits", in_features)
    return rule


def pack_panels(weight: torch.Tensor) -> torch.Tensor:
    """[N, K] (torch's linear layout) -> panels of PANEL output columns, each [K, width] with
    N contiguous, one after another (the last `N % PANEL` wide): cpu_gemm.c's layout."""
    out = hugepages.zeros((weight.numel(),), weight.dtype)  # streamed every decode step
    return torch.cat([weight[n: n + PANEL].t().contiguous().flatten() for n in range(0, weight.shape[0], PANEL)],
                     out=out)


def swiglu_order(rows: int) -> torch.Tensor:
    """Row order of a [gate; up] weight (2 I rows) for `exact_linear_swiglu`: each panel of PANEL
    rows holds PANEL / 2 gate rows, then the up rows of the same outputs."""
    inter, half = rows // 2, PANEL // 2
    return torch.cat([torch.cat([torch.arange(n, n + half), torch.arange(inter + n, inter + n + half)])
                      for n in range(0, inter, half)])


class PanelLinear(nn.Module):
    """y = x W^T + b for float32 CPU tensors on cpu_gemm.c, W packed in panels (`pack_panels`).

    Takes x [..., in_features], returns [..., out_features] with oneDNN's bits (the same sums in
    the same order), whatever the number of rows. out_features must be a multiple of LANES.
    """

    def __init__(self, linear: nn.Linear, swiglu: bool = False) -> None:
        super().__init__()
        weight = linear.weight.detach()
        if weight.device.type != "cpu" or weight.dtype != torch.float32 or weight.shape[0] % LANES:
            raise ValueError(f"PanelLinear takes float32 CPU weights with a multiple of {LANES} outputs")
        if swiglu and weight.shape[0] % (2 * PANEL):
            raise ValueError(f"a SwiGLU PanelLinear needs a multiple of {2 * PANEL} outputs")
        lib = load_gemm()
        if lib is None:
            raise RuntimeError("native panel linears are not available")
        self._lib = lib
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.bias = None if linear.bias is None else linear.bias.detach().contiguous()
        # With `swiglu`, the layer is a [gate; up] projection that returns silu(gate) * up
        # ([..., out_features / 2]): the activation runs on each panel's sums while they are in L2.
        self.fused_swiglu = swiglu
        if swiglu:
            order = swiglu_order(weight.shape[0])
            weight = weight.index_select(0, order)
            self.bias = None if self.bias is None else self.bias.index_select(0, order)
        self.packed = pack_panels(weight)
        self.block = onednn_block(self.in_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float32 or x.shape[-1] != self.in_features:
            raise ValueError(f"PanelLinear takes float32 [..., {self.in_features}], not {x.dtype} {tuple(x.shape)}")
        x = x.contiguous()
        rows = x.numel() // self.in_features
        bias = 0 if self.bias is None else self.bias.data_ptr()
        if self.fused_swiglu:
            out = torch.empty(*x.shape[:-1], self.out_features // 2)
            if self._lib.exact_linear_swiglu(x.data_ptr(), rows, self.in_features, self.packed.data_ptr(),
                                             self.out_features, bias, out.data_ptr(), self.block,
                                             torch.get_num_threads()):
                raise MemoryError("exact_linear_swiglu: no scratch memory")
            return out
        out = torch.empty(*x.shape[:-1], self.out_features)
        self._lib.exact_linear(x.data_ptr(), rows, self.in_features, self.packed.data_ptr(), self.out_features,
                               bias, out.data_ptr(), self.block,
                               torch.get_num_threads())
        return out

    def extra_repr(self) -> str:
        swiglu = ", swiglu" if self.fused_swiglu else ""
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}{swiglu}"


def pack_linears(model: nn.Module, required: bool = False, kind: str = "auto") -> int:
    """Swap every float32 CPU `nn.Linear` in `model` for a packed one; return how many.

    `kind`: "native" = `PanelLinear` (an error where cpu_gemm.c cannot build); "onednn" =
    `PackedLinear`; "auto" = `PanelLinear` where the native library builds and the layer's
    width allows, else `PackedLinear`. Does nothing (returns 0) where neither is available, unless
    `required` (then RuntimeError). A tied weight (an LM head sharing the embedding) is packed as
    a copy; the embedding keeps its own.
    """
    native = kind != "onednn" and load_gemm() is not None
    if kind == "native" and not native:
        raise RuntimeError("gemm=native but the native panel linears cannot be built here")
    if not native and not packing_available():
        if required:
            raise RuntimeError(f"gemm={kind} but this torch build cannot run oneDNN linears here")
        return 0
    swaps = [
        (parent, name, child)
        for parent in model.modules()
        for name, child in parent.named_children()
        if type(child) is nn.Linear and child.weight.device.type == "cpu" and child.weight.dtype == torch.float32
    ]
    packed = 0
    for parent, name, child in swaps:
        panel = native and child.out_features % LANES == 0
        if kind == "native" and not panel:
            raise RuntimeError(f"gemm=native needs a multiple of {LANES} outputs, not {child.out_features}")
        if panel or packing_available():
            # A [gate; up] projection (the model's `gate_up_proj`) takes its SwiGLU with it, unless
            # its MLP says its activation is another (`swiglu` False: Gemma's GELU-tanh).
            swiglu = (panel and name == SWIGLU_NAME and child.out_features % (2 * PANEL) == 0
                      and getattr(parent, "swiglu", True))
            setattr(parent, name, PanelLinear(child, swiglu) if panel else PackedLinear(child))
            packed += 1
    return packed
