"""One int8 linear at a time: cpu_quant.c's vector kernel against the float32 panels the kernel plan
may keep for many-row steps (`QuantLinear.attach_panels`), at 1, 16 and 64 rows, weights in cache.

Says whether a layer is compute-bound at a row count: both kernels' GFLOP/s beside the machine's
float32 FMA peak (bench/engine_throughput.py's `matmul_gflops`). The tile unit is kept off, so on an
AMX box this is the vector kernel too.

    python bench/quant_layer.py [--threads 2] [--reps 5]

Prints a table; the last line is JSON: per layer and row count `vector_us`, `panels_us` and their
GFLOP/s, and `vector_vs_panels_16` (the panels' time over the vector kernel's at 16 rows, mean over
the layers: above 1 the vector kernel is faster).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.append(str(Path(__file__).resolve().parents[1]))  # last: its kernels/ would shadow HF's (tests/conftest.py)

from fairgate.kernels.layers.quant_linear import QuantLinear  # noqa: E402
from fairgate.kernels.ops.quant_format import QuantMethod, quantize_weight  # noqa: E402

SHAPES = ((768, 3072), (3072, 768))  # (in, out): the 110m model's MLP up and down
ROWS = (1, 16, 64)


def best_seconds(fn: Callable[[], None], reps: int, rounds: int) -> float:
    for _ in range(20):
        fn()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - t0) / reps)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5, help="timed rounds; the best is kept")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    out: dict = {"threads": args.threads, "layers": {}}
    ratios = []
    print(f"{'layer':<12} {'rows':>4} {'vector us':>10} {'GF/s':>6} {'panels us':>10} {'GF/s':>6}")
    for k, n in SHAPES:
        layer = QuantLinear(quantize_weight(torch.randn(n, k) * 0.02, QuantMethod.parse("int8")), None, native=True)
        if layer.native is False:
            sys.exit("no native int8 kernel on this machine")
        layer.use_tile_unit(False)
        for m in ROWS:
            x, y = torch.randn(m, k), torch.empty(m, n)
            reps = 200 if m <= 16 else 50
            layer.attach_panels(None)
            vec = best_seconds(lambda layer=layer, x=x, y=y: layer.run_native(x, y), reps, args.reps)
            layer.attach_panels(1)
            panels = layer.panels_f32
            assert panels is not None
            pan = best_seconds(lambda panels=panels, x=x, y=y: panels(x, y), reps, args.reps)
            gf = 2 * m * n * k / 1e9
            name = f"{k}->{n}"
            out["layers"][f"{name}/{m}"] = {"vector_us": round(vec * 1e6, 1), "panels_us": round(pan * 1e6, 1),
                                            "vector_gflops": round(gf / vec, 1), "panels_gflops": round(gf / pan, 1)}
            if m == 16:
                ratios.append(pan / vec)
            print(f"{name:<12} {m:>4} {vec * 1e6:>10.1f} {gf / vec:>6.0f} {pan * 1e6:>10.1f} {gf / pan:>6.0f}")
    out["vector_vs_panels_16"] = round(sum(ratios) / len(ratios), 3)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
