"""Linear layers with weights packed once for the CPU's matmul library (oneDNN).

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


def pack_linears(model: nn.Module, required: bool = False) -> int:
    """Swap every float32 CPU `nn.Linear` in `model` for a `PackedLinear`; return how many.

    Does nothing (returns 0) where packing is unavailable, unless `required` (then RuntimeError).
    A tied weight (an LM head sharing the embedding) is packed as a copy; the embedding keeps its own.
    """
    if not packing_available():
        if required:
            raise RuntimeError("gemm=onednn but this torch build cannot run oneDNN linears here")
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
