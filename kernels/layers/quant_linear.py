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
same bits at 4x (int8) or 8x (int4) the bytes. Or an int8 one runs on the AMX tile unit at every
row count (`use_tile_unit`, cpu_quant.c's quant_amx.h: the activations as three int8 digits,
exact integer sums), where the CPU has it and the plan measured it faster; never both.
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
TILE_KIND = 2  # cpu_quant.c's W_INT8_AMX


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


def tile_layout(panels: torch.Tensor, to_tiles: bool) -> torch.Tensor:
    """int8 panels [P, K, 16] (cpu_quant.c's vector kernel) as [P, K/4, 16, 4] (the AMX tile
    unit's B tiles: four inputs of a channel together), or back; the same bytes, in the shape given."""
    p, k, lanes = panels.shape
    if to_tiles:
        return panels.view(p, k // 4, 4, lanes).transpose(2, 3).contiguous().view(p, k, lanes)
    return panels.view(p, k // 4, lanes, 4).transpose(2, 3).contiguous().view(p, k, lanes)


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
        self.tile_unit = False  # int8 on the AMX tile unit at every row count (`use_tile_unit`)
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
                m, self.out_features, self.in_features, self.method.group, self.cpu_kind,
                torch.get_num_threads(),
            )

    def attach_panels(self, rows: int | None) -> int:
        """Take float32 panels (built here) for steps of `rows` rows or more; None drops them.
        Returns the panels' bytes (0: none, or the layer does not fit them)."""
        # a layer on the tile unit does not fit them (other bits): it keeps none
        self.panels_f32 = QuantPanels(self, rows) if rows is not None and QuantPanels.fits(self) else None
        return 0 if self.panels_f32 is None else self.panels_f32.nbytes

    def tile_unit_fits(self) -> bool:
        """Whether this layer can run on the AMX tile unit here: int8 weight-only on cpu_quant.c,
        a multiple of 64 inputs, a CPU with AMX-INT8 whose kernel grants this process the tiles."""
        return (self._lib is not None and self._a8 is None and self.method.bits == 8
                and self._lib.quant_amx_path(self.in_features) == 1)

    def use_tile_unit(self, on: bool) -> bool:
        """Run on the AMX tile unit at every row count (on, where it fits) or on the vector kernel;
        returns whether it now runs there. The codes are repacked into the layout of the one that
        runs (`tile_layout`); the tile unit's bits are its own, so it drops float32 panels."""
        on = on and self.tile_unit_fits()
        if on != self.tile_unit:
            self.panels = tile_layout(self.panels, to_tiles=on)
            self.tile_unit = on
        if on:
            self.panels_f32 = None
        return on

    @property
    def cpu_kind(self) -> int | None:
        """cpu_quant.c's kind (0 int8, 1 int4, 2 int8 on the AMX tile unit) where `forward` runs its
        weight-only kernel on `panels`, `scale` and `minimum`; None where it runs cpu_quant_a8.c or
        the torch fallback."""
        if self._lib is None or self._a8 is not None:
            return None
        return TILE_KIND if self.tile_unit else _KIND[self.method.bits]

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
                f"int8_activations={self._a8 is not None}, tile_unit={self.tile_unit}")
