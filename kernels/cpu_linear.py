"""Linear layers with weights packed once for the CPU's matmul library (oneDNN).

`F.linear` on the CPU repacks the weight into the GEMM library's blocked layout on every call.
For a prefill of hundreds of tokens that cost hides behind the arithmetic; for a decode step
of 4 to 128 tokens it is most of the time (measured here on a 110M Llama, two cores: the
layers' matmuls run 1.4-1.8x faster packed at those sizes, the same at 512 tokens). Packing is a
module swap done once after loading, like a weight-only quantization step; the unpacked
weight is dropped, so memory does not grow.
"""

from __future__ import annotations

import functools
import logging

import torch
import torch.nn.functional as F
from torch import nn

log = logging.getLogger(__name__)

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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x.contiguous(), self.packed, self.bias, "none", [], "")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def pack_linears(model: nn.Module) -> int:
    """Swap every float32 CPU `nn.Linear` in `model` for a `PackedLinear`; return how many.

    Does nothing (returns 0) where packing is unavailable. A tied weight (an LM head sharing
    the embedding) is packed as a copy; the embedding keeps its own.
    """
    if not packing_available():
        return 0
    swaps = [
        (parent, name, child)
        for parent in model.modules()
        for name, child in parent.named_children()
        if type(child) is nn.Linear and child.weight.device.type == "cpu" and child.weight.dtype == torch.float32
    ]
    for parent, name, child in swaps:
        setattr(parent, name, PackedLinear(child))
    return len(swaps)
