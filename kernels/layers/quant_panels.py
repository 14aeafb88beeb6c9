"""Float32 panels of a weight-only quantized linear, for the steps of many rows where they run faster.

cpu_quant.c widens every weight to float32 in registers on each call and shares it over a tile of
rows (4 on AVX2, 8 on AVX-512); at a decode step of a few rows it reads a quarter (int8) or an
eighth (int4) of float32's bytes and wins. At many rows the arithmetic dominates and cpu_gemm.c's
tiles over float32 panels can win instead: on a Sapphire Rapids box int8 ran at 0.90x of float32
at batch 64 (issue 39). Which wins where depends on the CPU, so the kernel plan measures, on the
model's shapes, and keeps panels only where they win (`panel_rows`): they hold 4x an int8 layer's
bytes, 8x an int4 one's.

Same bits either way: the panels hold what cpu_quant.c's `tile` multiplies (int8: the codes; int4:
code * scale + minimum), unpacked by its own widening (`quant_unpack`), and cpu_gemm.c sums them in
one FMA chain over all K inputs from zero (kb = K), in input order, as `tile` does; then int8's
scale and bias take one multiply-add (`exact_linear_scaled`), int4's bias one add. A row's bits
do not depend on which path its step took (tests/kernels/test_quant_panels.py).
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

import torch

from fairgate.kernels.layers.panel_linear import pack_panels
from fairgate.kernels.native import abi

if TYPE_CHECKING:
    from fairgate.kernels.layers.quant_linear import QuantLinear

# The row counts timed: a lone decode row, a decode step's few rows up to max_num_seqs (64), and a
# prefill chunk's more. 1 is timed too: on a shared Zen 3 box (AVX2) cpu_quant.c's int8 kernel lost
# to the panels from 8 rows on by 6-15x (8 rows 17.0 / 2.9 ms, one layer of the 110M bench model).
MEASURED_ROWS = (1, 8, 16, 32, 64, 128)
MARGIN = 0.95  # panels must take at most this share of the quantized kernel's time: 4x the bytes for a tie is no win
SETTING = "FAIRGATE_QUANT_PANELS"  # "auto" (measure), "off", or the fewest rows that take the panels


class QuantPanels:
    """`panels(x, y)`: y [M, N] = the layer's output for x [M, K] (contiguous float32), on
    cpu_gemm.c over float32 panels; `rows`: the fewest rows a step needs to take them."""

    def __init__(self, layer: QuantLinear, rows: int) -> None:
        gemm, quant = abi.load(abi.GEMM), abi.load(abi.QUANT)
        assert gemm is not None and quant is not None and layer.cpu_kind is not None  # `fits` checked
        self._lib = gemm
        self.rows = rows
        self.kind = layer.cpu_kind
        self.in_features, self.out_features = layer.in_features, layer.out_features
        weights = torch.empty(layer.out_features, layer.in_features)  # [N, K] float32, what `tile` multiplies
        quant.quant_unpack(layer.panels.data_ptr(), layer.scale.data_ptr(),
                           0 if layer.minimum is None else layer.minimum.data_ptr(), weights.data_ptr(),
                           layer.out_features, layer.in_features, layer.method.group, self.kind)
        self.panels = pack_panels(weights)
        self._scale, self._bias = layer.scale, layer.bias  # int8's per-channel scale; the bias, added last

    @staticmethod
    def fits(layer: QuantLinear) -> bool:
        """Whether `layer` can take panels here: on cpu_quant.c's weight-only kernel, a multiple
        of LANES outputs (cpu_gemm.c's unit), cpu_gemm.c built."""
        return (layer.cpu_kind in (0, 1) and layer.out_features % abi.LANES == 0
                and abi.load(abi.GEMM) is not None)

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        m = x.shape[0]
        bias = 0 if self._bias is None else self._bias.data_ptr()
        threads = torch.get_num_threads()
        if self.kind == 0:
            self._lib.exact_linear_scaled(x.data_ptr(), m, self.in_features, self.panels.data_ptr(),
                                          self.out_features, self._scale.data_ptr(), bias, y.data_ptr(), threads)
        else:
            self._lib.exact_linear(x.data_ptr(), m, self.in_features, self.panels.data_ptr(), self.out_features,
                                   bias, y.data_ptr(), self.in_features, threads)

    @property
    def nbytes(self) -> int:
        return self.panels.numel() * self.panels.element_size()


def setting() -> str | int:
    """FAIRGATE_QUANT_PANELS, validated: "auto", "off", or a row count (1: every step)."""
    raw = os.environ.get(SETTING, "auto").strip().lower() or "auto"
    if raw in ("auto", "off"):
        return raw
    if raw.isdigit() and int(raw) >= 1:
        return int(raw)
    raise ValueError(f"{SETTING}={raw!r}; expected auto, off or a row count >= 1")


def available_memory() -> int | None:
    """Bytes of memory available now (Linux MemAvailable: free plus what the page cache can give
    back), or None where it cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def panel_rows(timings: dict[int, tuple[float, float]], margin: float = MARGIN) -> int | None:
    """The fewest rows from which the panels run, from {rows: (quantized s, panels s)}: the first
    count of the unbroken run of panel wins (panels <= margin x quantized) that reaches the largest
    count; None where the panels do not win there."""
    rows = None
    for m in sorted(timings, reverse=True):
        quantized, panels = timings[m]
        if panels > margin * quantized:
            break
        rows = m
    return rows


def measure(layers: list[QuantLinear], counts: tuple[int, ...] = MEASURED_ROWS,
            reps: int = 3) -> dict[int, tuple[float, float]]:
    """{rows: (quantized s, panels s)}: the best of `reps` of all `layers` in turn (one decoder
    layer's linears: the model's shapes), on the quantized kernel and on panels built for the
    measurement and dropped after it."""
    trial = [(layer, QuantPanels(layer, 1)) for layer in layers]
    gen = torch.Generator().manual_seed(0)
    out = {}
    for m in counts:
        xs = [torch.randn(m, layer.in_features, generator=gen) for layer in layers]
        ys = [torch.empty(m, layer.out_features) for layer in layers]
        best = [float("inf"), float("inf")]
        for _ in range(reps):
            for path in (0, 1):
                start = time.perf_counter()
                for (layer, panels), x, y in zip(trial, xs, ys, strict=True):
                    (panels if path else layer.run_native)(x, y)
                best[path] = min(best[path], time.perf_counter() - start)
        out[m] = (best[0], best[1])
    return out
