"""Weight-only quantization formats: how a float weight [N, K] becomes codes plus scales.

- int8: symmetric, one scale per output channel: w[n, k] ~= q[n, k] * scale[n], q in [-127, 127].
- int4: asymmetric per group of `group` inputs: w[n, k] ~= code[n, k] * scale[n, g] + minimum[n, g]
  with g = k // group and code in [0, 15]; two codes per byte along k (even k in the low nibble).

These logical tensors are what `fairgate quantize` saves and what the torch reference and the
Triton kernel read; the native CPU kernel repacks them once at load (kernels/layers/quant_linear.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

METHOD_PATTERN = re.compile(r"^(int8|int4)(?:-g(\d+))?(-a8)?$")
DEFAULT_INT4_GROUP = 64


@dataclass(slots=True, frozen=True)
class QuantMethod:
    """A parsed `--quantization` value: `int8`, `int4` (group 64), `int4-gN`, or `int8-a8`:
    int8 weights (stored as `int8`) whose CPU kernel also quantizes activations per row to int8
    for batches of `quant_linear.A8_MIN_ROWS`+ rows, so the dot products run in integers."""

    bits: int
    group: int = 0  # inputs per scale (int4 only)
    activations: int = 0  # 8: dynamic int8 activations (int8 weights only); 0: float

    @classmethod
    def parse(cls, text: str) -> QuantMethod:
        m = METHOD_PATTERN.match(text.strip().lower())
        if m is None:
            raise ValueError(f"unknown quantization {text!r}; use int8, int8-a8, int4 or int4-gN")
        if m.group(1) == "int8":
            if m.group(2):
                raise ValueError("int8 is per output channel; it takes no group size")
            return cls(8, 0, 8 if m.group(3) else 0)
        if m.group(3):
            raise ValueError("int8 activations (-a8) go with int8 weights only")
        group = int(m.group(2) or DEFAULT_INT4_GROUP)
        if group < 2 or group % 2:
            raise ValueError(f"int4 group size must be an even number >= 2, got {group}")
        return cls(4, group)

    @property
    def name(self) -> str:
        if self.bits == 8:
            return "int8-a8" if self.activations else "int8"
        return f"int4-g{self.group}"


@dataclass(slots=True)
class QuantizedWeight:
    """Codes and scales of one linear weight [out_features, in_features] (see the module doc)."""

    method: QuantMethod
    qweight: torch.Tensor  # int8 [N, K] | uint8 [N, K // 2]
    scale: torch.Tensor  # float32 [N] | [N, K // group]
    minimum: torch.Tensor | None  # None | float32 [N, K // group]
    in_features: int

    @property
    def out_features(self) -> int:
        return self.qweight.shape[0]

    def nbytes(self) -> int:
        parts = [self.qweight, self.scale] + ([self.minimum] if self.minimum is not None else [])
        return sum(t.numel() * t.element_size() for t in parts)


def quantize_weight(weight: torch.Tensor, method: QuantMethod) -> QuantizedWeight:
    """Quantize a float weight [N, K]; int4 needs K to be a multiple of the group size."""
    w = weight.detach().float()
    n, k = w.shape
    if method.bits == 8:
        scale = (w.abs().amax(dim=1) / 127.0).clamp(min=1e-12)  # [N]
        q = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8)
        return QuantizedWeight(method, q.contiguous(), scale.contiguous(), None, k)
    if k % method.group:
        raise ValueError(f"in_features {k} is not a multiple of the int4 group size {method.group}")
    wg = w.view(n, k // method.group, method.group)  # [N, G, group]
    lo, hi = wg.amin(dim=-1), wg.amax(dim=-1)  # [N, G]
    scale = ((hi - lo) / 15.0).clamp(min=1e-12)
    codes = torch.round((wg - lo[..., None]) / scale[..., None]).clamp(0, 15).to(torch.uint8).view(n, k)
    packed = codes[:, 0::2] | (codes[:, 1::2] << 4)  # [N, K // 2]
    return QuantizedWeight(method, packed.contiguous(), scale.contiguous(), lo.contiguous(), k)


def int4_codes(qweight: torch.Tensor) -> torch.Tensor:
    """uint8 [N, K // 2] packed codes -> uint8 [N, K], one code per element."""
    return torch.stack([qweight & 15, qweight >> 4], dim=-1).view(qweight.shape[0], -1)


def dequantize_weight(qw: QuantizedWeight) -> torch.Tensor:
    """The float32 weight [N, K] the codes stand for (for tests and the torch reference)."""
    if qw.method.bits == 8:
        return qw.qweight.float() * qw.scale[:, None]
    n, k, group = qw.out_features, qw.in_features, qw.method.group
    codes = int4_codes(qw.qweight).float().view(n, k // group, group)
    assert qw.minimum is not None
    return (codes * qw.scale[..., None] + qw.minimum[..., None]).view(n, k)
