"""Whether int8 weight-only linears run on the AMX tile unit, decided by measuring.

On a CPU with AMX-INT8 (Sapphire Rapids and later) cpu_quant.c can run an int8 linear as integer
tile products (quant_amx.h): each row of activations written as three int8 digits on a
power-of-two scale, three TDPBSSD per tile of codes, exact int32 sums, one float32 combination.
The vector kernel instead widens every code to float32 and does a float32 FMA per weight and row,
so at a decode step of 16 rows it runs at float32's speed (int8 1.07x float32 on a Sapphire Rapids
box, issue 39). The tile unit's bits are not the vector kernel's, but a row's bits are the same at
every row count, so a layer takes it for all of its steps or for none (`QuantLinear.use_tile_unit`),
and never beside float32 panels.

FAIRGATE_QUANT_TILES: "auto" (default) measures on the first layer's shapes and takes the tile unit
where `tiles_win`; "on" takes it wherever it fits; "off" never does.
"""

from __future__ import annotations

import math
import os
import time
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from fairgate.kernels.layers.quant_linear import QuantLinear

SETTING = "FAIRGATE_QUANT_TILES"
# A decode step's rows (1, a few, 16 and more) and a prefill chunk's.
MEASURED_ROWS = (1, 8, 16, 32, 64, 128)
MARGIN = 0.95  # the tile unit must take at most this share of the vector path's time from 8 rows on
# ... and at most this multiple of it at one row. A lone row streams the weights from memory on either
# path; on a Sapphire Rapids box the tile unit's linears took 1.04-1.06x the vector kernel's there
# (every layer of the 110M bench model, 7.2-7.5 against 7.5-8.0 ms) while the whole batch-1 step
# measured no slower (bench/quantization.py 116.4 against 114.5 tok/s) and 16 rows ran 1.9x faster.
ONE_ROW_SLACK = 1.10
STREAMED_BYTES = 1 << 30  # the most codes the one-row pass reads (a 480 MiB L3 has been seen)


def setting() -> str:
    """FAIRGATE_QUANT_TILES, validated: "auto", "on" or "off"."""
    raw = os.environ.get(SETTING, "auto").strip().lower() or "auto"
    if raw not in ("auto", "on", "off"):
        raise ValueError(f"{SETTING}={raw!r}; expected auto, on or off")
    return raw


def tiles_win(timings: dict[int, tuple[float, float]], margin: float = MARGIN, slack: float = ONE_ROW_SLACK) -> bool:
    """From {rows: (vector s, tile unit s)}: whether the tile unit wins. It must win at many rows
    (the geometric mean of its time ratios from 8 rows on at most `margin`) and take at most
    `slack` times the vector kernel's time at one row."""
    many = [tiles / vector for m, (vector, tiles) in timings.items() if m >= 8]
    if not many:
        return False
    mean = math.exp(sum(math.log(r) for r in many) / len(many))
    one = timings.get(1)
    return mean <= margin and (one is None or one[1] <= one[0] * slack)


def streamed(layers: list[QuantLinear], most: int = STREAMED_BYTES) -> list[QuantLinear]:
    """The first of `layers` whose codes add up to `most` bytes (all of them if they hold less):
    enough for one row's pass to read its weights from memory, not so many that a large model's
    start pays for repacking all of its codes twice."""
    out, total = [], 0
    for layer in layers:
        if total >= most:
            break
        out.append(layer)
        total += layer.panels.numel() * layer.panels.element_size()
    return out


def measure(first: list[QuantLinear], every: list[QuantLinear] | None = None,
            counts: tuple[int, ...] = MEASURED_ROWS, reps: int = 3) -> dict[int, tuple[float, float]]:
    """{rows: (vector s, tile unit s)}: the best of `reps` of the linears in turn on each path;
    `first` (one decoder layer's int8 linears that fit the tile unit: the model's shapes) at
    every count but 1, `every` (all layers' such linears; default `first`) at 1 row, where a step
    reads every weight from memory and one layer's would come from cache. The layers are left on
    the vector kernel."""
    gen = torch.Generator().manual_seed(0)
    out = {}
    try:
        for m in counts:
            layers = (every or first) if m == 1 else first
            xs = [torch.randn(m, layer.in_features, generator=gen) for layer in layers]
            ys = [torch.empty(m, layer.out_features) for layer in layers]
            best = [float("inf"), float("inf")]
            for path in (0, 1):  # each switch repacks the codes: once per path and count
                for layer in layers:
                    layer.use_tile_unit(bool(path))
                for _ in range(reps):
                    start = time.perf_counter()
                    for layer, x, y in zip(layers, xs, ys, strict=True):
                        layer.run_native(x, y)
                    best[path] = min(best[path], time.perf_counter() - start)
            out[m] = (best[0], best[1])
    finally:
        for layer in every or first:
            layer.use_tile_unit(False)
    return out
