"""`QuantLinear`: a linear layer whose weight is int8 per channel or int4 per group.

On the CPU the codes are repacked once into the native kernel's panel layout (cpu_quant.c) and
`forward` is one ctypes call on the tensors' memory: no per-call dequantization, no dispatch
layers between the model and the loop. Elsewhere (CUDA, or FAIRGATE_KERNELS=reference) it
keeps the logical codes and calls `fallback`: the kernel plan's `weight_only_linear` (Triton or the
torch reference; `KernelPlan.quant_linear` builds the layer so).

`int8-a8` layers take cpu_quant_a8.c instead where it builds with SIMD (AVX-512 VNNI or AVX2):
activations quantized per row, integer dot products (kernels/ops/quant_a8.py). Measured against
the weight-only kernel on the 110M bench model's shapes, one thread, it is faster at every
batch from M = 1 (VNNI 3.3-4.3x, AVX2 1.2-2.5x), so it takes all rows and the layer keeps only
its layout; the plain-C build of it is not faster, so there the weight-only kernel stays.

A weight-only layer may also hold float32 panels of its weights (`panels`, kernels/layers/quant_panels.py),
which steps of `panels.rows` rows or more take, where the kernel plan measured them faster: the
same bits at 4x (int8) or 8x (int4) the bytes.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from fairgate.kernels.layers.quant_panels import QuantPanels
from fairgate.kernels.native import abi
from fairgate.kernels.native.abi import LANES  # output channels per panel (cpu_quant.c)
from fairgate.kernels.ops import reference
from fairgate.kernels.ops.quant_a8 import MAX_K, pack_a8, reference_a8
from fairgate.kernels.ops.quant_format import QuantizedWeight, int4_codes

_KIND = {8: 0, 4: 1}


def pack_for_cpu(qw: QuantizedWeight) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Logical codes -> (panels, scale, minimum) in cpu_quant.c's layout (see its header)."""
    n, k = qw.out_features, qw.in_features
    panels = -(-n // LANES)
    pad = panels * LANES - n
    if qw.method.bits == 8:
        q = F.pad(qw.qweight, (0, 0, 0, pad)).view(panels, LANES, k)  # [P, 16, K]
        return q.transpose(1, 2).contiguous(), F.pad(qw.scale, (0, pad)).contiguous(), None
    codes = F.pad(int4_codes(qw.qweight), (0, 0, 0, pad)).view(panels, LANES, k).transpose(1, 2)  # [P, K, 16]
    packed = codes[..., : LANES // 2] | (codes[..., LANES // 2 :] << 4)  # [P, K, 8]
    groups = k // qw.method.group

    def by_panel(t: torch.Tensor) -> torch.Tensor:  # [N, G] -> [P, G, 16]
        return F.pad(t, (0, 0, 0, pad)).view(panels, LANES, groups).transpose(1, 2).contiguous()

    assert qw.minimum is not None
    return packed.contiguous(), by_panel(qw.scale), by_panel(qw.minimum)


class QuantLinear(nn.Module):
    """y = x W^T + b, W weight-only quantized. Takes x [..., in_features] -> [..., out_features]."""

    def __init__(self, qw: QuantizedWeight, bias: torch.Tensor | None, native: bool,
                 fallback: Callable[..., torch.Tensor] = reference.quant_linear) -> None:
        super().__init__()
        self._fallback = fallback  # (x, qw, bias) -> y where no native kernel runs
        self.in_features, self.out_features = qw.in_features, qw.out_features
        self.method = qw.method
        self.bias = None if bias is None else bias.detach().float().contiguous()
        self._lib = self._a8 = None
        self.panels_f32: QuantPanels | None = None  # float32 panels for steps of many rows (`attach_panels`)
        if native:
            self._lib = abi.load(abi.QUANT)
            if qw.method.activations == 8 and qw.in_features <= MAX_K:
                lib = abi.load(abi.QUANT_A8)
                self._a8 = lib if lib is not None and lib.quant_a8_path() > 0 else None
        if self._a8 is not None:
            self.panels, self.scale, self.colsum = pack_a8(qw)
            self.minimum, self.qw = None, None
        elif self._lib is not None:
            self.panels, self.scale, self.minimum = pack_for_cpu(qw)
            self.qw = None
        else:
            self.qw = qw

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.qw is not None:
            if self.method.activations == 8 and x.device.type == "cpu":  # int8-a8, in torch
                return reference_a8(x, self.qw, self.bias).to(x.dtype)
            return self._fallback(x, self.qw, self.bias)  # (CUDA: float activations)
        shape = x.shape
        x2 = x.reshape(-1, self.in_features)
        if x2.dtype != torch.float32 or x2.stride(1) != 1:
            x2 = x2.float().contiguous()
        m = x2.shape[0]
        y = torch.empty(m, self.out_features, dtype=torch.float32)
        if self.panels_f32 is not None and m >= self.panels_f32.rows:
            self.panels_f32(x2 if x2.is_contiguous() else x2.contiguous(), y)
        else:
            self.run_native(x2, y)
        y = y.view(*shape[:-1], self.out_features)
        return y if x.dtype == torch.float32 else y.to(x.dtype)

    def run_native(self, x2: torch.Tensor, y: torch.Tensor) -> None:
        """y [M, N] = x2 [M, K] W^T + b on this layer's quantized kernel (float32, rows with unit stride)."""
        m = x2.shape[0]
        if m and self._a8 is not None:
            rc = self._a8.quant_linear_a8(
                x2.data_ptr(), x2.stride(0), self.panels.data_ptr(), self.scale.data_ptr(),
                self.colsum.data_ptr(),
                0 if self.bias is None else self.bias.data_ptr(), y.data_ptr(), y.stride(0),
                m, self.out_features, self.in_features, torch.get_num_threads(),
            )
            if rc != 0:
                raise MemoryError("quant_linear_a8: no scratch memory")
        elif m:
            self._lib.quant_linear(
                x2.data_ptr(), x2.stride(0), self.panels.data_ptr(), self.scale.data_ptr(),
                0 if self.minimum is None else self.minimum.data_ptr(),
                0 if self.bias is None else self.bias.data_ptr(), y.data_ptr(), y.stride(0),
                m, self.out_features, self.in_features, self.method.group, _KIND[self.method.bits],
                torch.get_num_threads(),
            )

    def attach_panels(self, rows: int | None) -> int:
        """Take float32 panels (built here) for steps of `rows` rows or more; None drops them.
        Returns the panels' bytes (0: none, or the layer does not fit them)."""
        self.panels_f32 = QuantPanels(self, rows) if rows is not None and QuantPanels.fits(self) else None
        return 0 if self.panels_f32 is None else self.panels_f32.nbytes

    @property
    def cpu_kind(self) -> int | None:
        """cpu_quant.c's kind (0 int8, 1 int4) where `forward` runs its weight-only kernel on
        `panels`, `scale` and `minimum`; None where it runs cpu_quant_a8.c or the torch fallback."""
        return _KIND[self.method.bits] if self._lib is not None and self._a8 is None else None

    @property
    def native(self) -> bool:
        """Whether `forward` runs on a native CPU kernel (not the torch fallback)."""
        return self.qw is None

    def weight_bytes(self) -> int:
        """Bytes this layer holds for its weight (codes and scales; bias not counted)."""
        parts = [self.qw.qweight, self.qw.scale, self.qw.minimum] if self.qw is not None else [
            self.panels, self.scale, self.minimum, getattr(self, "colsum", None),
            None if self.panels_f32 is None else self.panels_f32.panels]
        return sum(t.numel() * t.element_size() for t in parts if t is not None)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"{self.method.name}, native={self._lib is not None}, "
                f"int8_activations={self._a8 is not None}")
