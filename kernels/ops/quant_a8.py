"""int8 weights x dynamically quantized int8 activations (`--quantization int8-a8`).

The native kernel (cpu_quant_a8.c) quantizes each row of x to int8 with one symmetric scale,
takes exact int32 dot products against the int8 weight codes, and scales back to float32.
This module packs the weight codes into its layout and holds the torch reference that
computes the same numbers (tests compare the two).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from fairgate.kernels.native.abi import LANES  # output channels per panel (cpu_quant_a8.c)
from fairgate.kernels.ops.quant_format import QuantizedWeight

QUAD = 4  # inputs per 32-bit group of the dot-product instructions
MAX_K = 65536  # int32 sums stay exact up to here (cpu_quant_a8.c's header)


def pack_a8(qw: QuantizedWeight) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """int8 codes [N, K] -> (panels [P, K4, 16, 4] int8, scale [P * 16], colsum [P * 16] int32)."""
    n, k = qw.out_features, qw.in_features
    panels, k4 = -(-n // LANES), -(-k // QUAD)
    q = F.pad(qw.qweight, (0, k4 * QUAD - k, 0, panels * LANES - n))  # [P*16, K4*4]
    packed = q.view(panels, LANES, k4, QUAD).permute(0, 2, 1, 3).contiguous()  # [P, K4, 16, 4]
    colsum = q.to(torch.int32).sum(dim=1, dtype=torch.int32).contiguous()
    scale = F.pad(qw.scale.float(), (0, panels * LANES - n)).contiguous()
    return packed, scale, colsum


def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [M, K] float32 -> (codes [M, K] int8, row scales [M]) exactly as cpu_quant_a8.c does it."""
    absmax = x.abs().amax(dim=1)  # [M]
    inv = torch.where(absmax > 0, torch.tensor(127.0) / absmax, torch.zeros_like(absmax))
    codes = torch.round(x * inv[:, None]).clamp(-127, 127).to(torch.int8)
    return codes, absmax / torch.tensor(127.0)


def reference_a8(x: torch.Tensor, qw: QuantizedWeight, bias: torch.Tensor | None = None,
                 ) -> torch.Tensor:
    """x [..., K] -> [..., N] float32: the kernel's result, its integer sums taken in float64."""
    x2 = x.reshape(-1, qw.in_features).float()
    codes, row_scale = quantize_rows(x2)
    dots = codes.double() @ qw.qweight.double().t()  # [M, N], exact integers
    y = (dots.float() * (row_scale[:, None] * qw.scale.float()[None, :]))
    if bias is not None:
        y = y + bias.float()
    return y.view(*x.shape[:-1], qw.out_features)
