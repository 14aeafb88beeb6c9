"""How `KernelPlan.choose` decides: one function per operation, each saying what runs and why.

Everything a choice depends on is settled here, once: the native libraries the plan names are
built and loaded (a library this CPU cannot build is a reason, not a later surprise), triton is
imported where the plan wants it.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

from fairgate.kernels import plan as _plan
from fairgate.kernels.layers import quant_tiles
from fairgate.kernels.layers.quant_panels import QuantPanels, measure
from fairgate.kernels.native import abi, build
from fairgate.kernels.ops import cpu_fused, cpu_ops, reference
from fairgate.kernels.plan import Choice

if TYPE_CHECKING:
    from fairgate.kernels.layers.quant_linear import QuantLinear
    from fairgate.kernels.plan import KernelPlan

_A8_PATHS = {2: "AVX-512 VNNI", 1: "AVX2"}


def choose(cls: type[KernelPlan], mode: str, device: str, gemm: str) -> KernelPlan:
    ops, attention = _attention(mode, device)
    native = device == "cpu" and mode in ("auto", "native")
    fused = cpu_fused if ops is cpu_ops and abi.load(abi.FUSED) is not None else reference
    choices = {
        "kv_write": _kv_write(ops, fused, attention),
        "decode_attention": attention,
        "prefill_attention": _prefill(ops, attention),
        "fused": _fused(ops, fused, attention),
        "dense_linears": _dense(mode, device, gemm),
        "quant_linears": _quant(mode, device, native, ops),
        "layer_stack": _program(abi.STACK, native and ops is cpu_ops, mode, device,
                                "every decoder layer of a step in one call, where the model and caches fit"),
        "greedy_head": _program(abi.GREEDY, native and ops is cpu_ops, mode, device,
                                lambda: f"a bfloat16 screen of the LM head ({_screen()}), then float32 for the candidates"),
        "draft_round": _program(abi.DRAFT, native, mode, device, "a float32 draft model's decode round in one call"),
    }
    return cls(mode, device, gemm, ops, fused, native, tuple((op, choices[op]) for op in _plan.OPERATIONS))


def _off(mode: str, device: str) -> str:
    """Why the native CPU kernels do not run here."""
    if mode in ("reference", "triton"):
        return f"FAIRGATE_KERNELS={mode}"
    return "the native kernels run on the CPU" if device != "cpu" else "the native CPU kernels did not build"


def _built(spec: abi.Library) -> str:
    return f"{spec.source} built for {build.instruction_sets()}"


def _attention(mode: str, device: str) -> tuple[ModuleType, Choice]:
    """The module of write_kv and the paged attention, and why."""
    if mode == "reference":
        return reference, Choice("reference", "FAIRGATE_KERNELS=reference")
    if mode == "native" or (mode == "auto" and device == "cpu"):
        ops, why = _plan._load_native()
        if ops is not None:
            return ops, Choice("native", _built(abi.ATTENTION) + (" (FAIRGATE_KERNELS=native)" if mode == "native" else ""))
        if mode == "native":
            raise RuntimeError(f"FAIRGATE_KERNELS=native but {why}")
        return reference, Choice("reference", str(why))
    ops, why = _plan._load_triton()
    if ops is not None:
        return ops, Choice("triton", "CUDA" if device == "cuda" else "FAIRGATE_KERNELS=triton (the interpreter on the CPU)")
    if mode == "triton":
        raise RuntimeError(f"FAIRGATE_KERNELS=triton but the Triton kernels cannot load: {why}")
    return reference, Choice("reference", f"triton unavailable: {why}")


def _kv_write(ops: ModuleType, fused: ModuleType, attention: Choice) -> Choice:
    if fused is cpu_fused:
        return Choice("native", "RoPE and the KV write in one pass (cpu_fused.c) for a float32 cache; "
                                "the torch write for a quantized one")
    if attention.impl == "triton":
        return Choice("triton", "the torch rotation, then the Triton KV write")
    return Choice("reference", attention.why if ops is reference else "cpu_fused.c did not build")


def _prefill(ops: ModuleType, attention: Choice) -> Choice:
    if ops is cpu_ops:
        return Choice("native", "cpu_attention.c for a float32 cache; torch's SDPA per sequence for others")
    return attention


def _fused(ops: ModuleType, fused: ModuleType, attention: Choice) -> Choice:
    if fused is cpu_fused:
        return Choice("native", "rms_norm, qk_norm, silu_mul and argmax on " + _built(abi.FUSED))
    if ops is cpu_ops:
        return Choice("reference", f"cpu_fused.c did not build ({abi.why_not(abi.FUSED)})")
    return Choice("reference", attention.why if attention.impl == "reference" else "no fused kernels off the CPU")


def _dense(mode: str, device: str, gemm: str) -> Choice:
    """The float32 linears: panel (cpu_gemm.c), oneDNN packed, or torch's F.linear."""
    from fairgate.kernels.layers.panel_linear import packing_available

    if gemm == "torch":
        return Choice("torch", "gemm=torch")
    if gemm == "auto" and (device != "cpu" or mode not in ("auto", "native")):
        return Choice("torch", _off(mode, device))
    if gemm != "onednn" and abi.load(abi.GEMM) is not None:
        return Choice("panel", _built(abi.GEMM) + ", oneDNN's bits (oneDNN for widths not a multiple of "
                      f"{abi.LANES})")
    if gemm == "native":  # pack_linears raises at the runner's start
        return Choice("panel", f"gemm=native but cpu_gemm.c did not build ({abi.why_not(abi.GEMM)})")
    if packing_available():
        why = "gemm=onednn" if gemm == "onednn" else f"cpu_gemm.c did not build ({abi.why_not(abi.GEMM)})"
        return Choice("onednn", why)
    return Choice("torch", "neither the panel nor the oneDNN linears run here")


def _quant(mode: str, device: str, native: bool, ops: ModuleType) -> Choice:
    """Weight-only int8/int4 linears (and int8-a8)."""
    if native:
        quant = abi.load(abi.QUANT)
        if quant is None:
            return Choice("reference", f"cpu_quant.c did not build ({abi.why_not(abi.QUANT)})")
        a8 = abi.load(abi.QUANT_A8)
        path = 0 if a8 is None else a8.quant_a8_path()
        a8_why = (f"int8-a8 on cpu_quant_a8.c ({_A8_PATHS[path]})" if path else
                  "int8-a8 on the weight-only kernel (cpu_quant_a8.c has no SIMD path here)")
        return Choice("native", f"{_built(abi.QUANT)}; {a8_why}")
    if ops is not reference and getattr(ops, "quant_linear", None) is not None:
        return Choice("triton", "the Triton weight-only matmul")
    return Choice("reference", _off(mode, device))


def _program(spec: abi.Library, wanted: bool, mode: str, device: str, what: str | Callable[[], str]) -> Choice:
    """A whole-model program: native where the plan runs native kernels and its library loads."""
    if not wanted:
        return Choice("per-op", _off(mode, device))
    if abi.load(spec) is None:
        return Choice("per-op", f"{spec.source} did not build ({abi.why_not(spec)})")
    return Choice("native", f"{spec.source}: {what if isinstance(what, str) else what()}")


def _screen() -> str:
    lib = abi.load(abi.GREEDY)
    if lib is None:
        return "not built"
    return ("float32 FMAs, calibrated", "AVX512-BF16", "AMX for a multiple of 32 inputs")[lib.greedy_screen(32)]


def quant_panels(layers: list[list[QuantLinear]], native: bool, free: int | None = None) -> Choice | None:
    """What the weight-only int8 / int4 linears (`layers`: each decoder layer's) run on: the AMX
    tile unit for int8 where it fits and wins (`_tile_unit`), else cpu_quant.c's vector kernel, which
    also takes float32 panels for steps of many rows where they measure faster on the first
    layer's shapes (FAIRGATE_QUANT_PANELS auto, kernels/layers/quant_panels.py). Attaches what runs
    and returns what the plan records (None: no such linears). Auto never keeps panels that would
    take more than half the memory free now (`free`, bytes; default: MemAvailable): a model
    quantized to fit must not be given its float32 weights back."""
    if not native or not layers:
        return None
    tiles = _tile_unit(layers)
    if tiles is not None and tiles.impl == "native-amx":
        return Choice("native", tiles.why)
    panels = _float_panels(layers, free)
    if tiles is None or panels is None:
        return panels or tiles
    return Choice(panels.impl, f"{panels.why}; {tiles.why}")


def _float_panels(layers: list[list[QuantLinear]], free: int | None) -> Choice | None:
    from fairgate.kernels.layers.quant_panels import available_memory, panel_rows, setting

    fit = [[q for q in layer if QuantPanels.fits(q)] for layer in layers]
    if not fit or not fit[0]:
        return None
    want, kinds = setting(), "/".join(sorted({q.method.name for q in fit[0]}))
    if want == "off":
        return Choice("native", f"{kinds} on cpu_quant.c at every row count (FAIRGATE_QUANT_PANELS=off)")
    need = sum(4 * q.in_features * q.out_features for layer in fit for q in layer)
    free = available_memory() if free is None else free
    if want == "auto" and free is not None and need > free // 2:
        return Choice("native", f"{kinds} on cpu_quant.c at every row count; float32 panels not measured: "
                                f"they would take {need / 2**20:.1f} MiB, more than half the {free / 2**20:.0f} MiB "
                                "free (FAIRGATE_QUANT_PANELS=<rows> forces them)")
    if want == "auto":
        shapes = {(q.in_features, q.out_features, q.method.name): q for q in fit[0]}  # an MoE layer's experts: once
        timings = measure(list(shapes.values()))
        rows, how = panel_rows(timings), "measured: " + ", ".join(
            f"{m} rows {q * 1e3:.2f} / {f * 1e3:.2f} ms" for m, (q, f) in sorted(timings.items()))
    else:
        rows, how = int(want), f"FAIRGATE_QUANT_PANELS={want}"
    extra = sum(q.attach_panels(rows) for layer in fit for q in layer)
    if rows is None:
        return Choice("native", f"{kinds} on cpu_quant.c at every row count; float32 panels kept off, "
                                f"they do not win ({how}, quantized / panels, one layer)")
    where = f"on cpu_quant.c up to {rows - 1} rows, float32 panels of the same weights from {rows}" if rows > 1 else \
        "on float32 panels of the same weights at every row count"
    return Choice("native", f"{kinds} {where} (the same bits; +{extra / 2**20:.1f} MiB kept) "
                            f"({how}, quantized / panels, one layer)")


def _tile_unit(layers: list[list[QuantLinear]]) -> Choice | None:
    """The AMX tile unit for the int8 linears (kernels/layers/quant_tiles.py): impl "native-amx"
    where every layer's fitting linears now run there, "native" where they stay on the vector
    kernel (why: the measurement or the setting), None where no linear fits it here."""
    first = [q for q in layers[0] if q.tile_unit_fits()]
    if not first:
        return None
    want = quant_tiles.setting()
    if want == "off":
        return Choice("native", "int8 on the vector kernel (FAIRGATE_QUANT_TILES=off)")
    how = "FAIRGATE_QUANT_TILES=on"
    if want == "auto":
        every = quant_tiles.streamed([q for layer in layers for q in layer if q.tile_unit_fits()])
        timings = quant_tiles.measure(first, every)
        how = "measured: " + ", ".join(f"{m} rows {v * 1e3:.2f} / {t * 1e3:.2f} ms" for m, (v, t) in
                                       sorted(timings.items())) + " (vector / tiles; one layer, every layer at 1 row)"
        if not quant_tiles.tiles_win(timings):
            return Choice("native", f"int8 on the vector kernel; the AMX tile unit does not win ({how})")
    on = sum(q.use_tile_unit(True) for layer in layers for q in layer)
    return Choice("native-amx", f"int8 on the AMX tile unit at every row count, {on} linears (activations as "
                                f"three int8 digits, exact integer sums; cpu_quant.c's quant_amx.h) ({how})")
