"""The one boundary between Python and the native CPU kernels: every library this folder builds,
each entry point with its named, typed parameters (in the C definition's order), the structs
Python fills in for the whole-model programs, and the checks made when a library loads.

A library loads once per process (`load`), built by `build.build_library`. It then must agree
with this module: every library exports fg_common.h's LANES and PANEL, and each program the
sizes of the structs mirrored here (`fg_sizeof_*`); a difference is an `ABIError`, never a
silent fallback. No compiler, or a failed build, means `load` returns None (logged once, with
the reason `why_not` gives) and the caller keeps a slower path.
"""

from __future__ import annotations

import ctypes
import functools
import logging
from dataclasses import dataclass

import torch  # noqa: F401 - loaded first, so the libraries share torch's OpenMP runtime (build.py)

from fairgate.kernels.native.build import FOLDER, build_library

log = logging.getLogger(__name__)

LANES = 16  # fg_common.h's layout unit: head_dim and panel / quantized linear widths are multiples
PANEL = 64  # fg_common.h's output columns per packed weight panel

P, I32, I64, F32, F64, SIZE = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_float, ctypes.c_double, ctypes.c_size_t
CType = type[ctypes._SimpleCData]


class ABIError(RuntimeError):
    """A built library disagrees with this module (a constant or a struct size)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One exported C function: its name, return type (None: void) and parameters in order."""

    name: str
    returns: CType | None
    params: tuple[tuple[str, CType], ...]


def fn(name: str, returns: CType | None, **params: CType) -> Entry:
    return Entry(name, returns, tuple(params.items()))


# ---- the structs the programs take (fg_common.h's fg_layer; cpu_stack.c; cpu_draft.c) ----------

LAYER_FIELDS = ("input_norm", "qkv", "qkv_bias", "o", "o_bias", "post_norm", "gate_up", "gate_up_bias",
                "down", "down_bias", "q_norm", "k_norm", "k_cache", "v_cache")


class Layer(ctypes.Structure):
    """fg_layer: one decoder layer's weights and caches, as pointers."""

    _fields_ = [(name, P) for name in LAYER_FIELDS]


class StackWeight(ctypes.Structure):
    """cpu_stack.c's stack_weight: how one linear's weight is held (scale NULL: float32 panels), and
    a quantized one's float32 panels with the fewest rows that take them (panels NULL: none)."""

    _fields_ = [("scale", P), ("minimum", P), ("kind", I32), ("group", I32), ("panels", P), ("panel_rows", I64)]


STACK_LINEARS = ("qkv", "o", "down", "gate_up")  # fg_layer.h's FG_QKV ... FG_GATE_UP: a layer's stack_weights


class StackModel(ctypes.Structure):
    """cpu_stack.c's stack_model."""

    _fields_ = [
        *((name, I32) for name in ("num_layers", "hidden", "heads", "kv_heads", "head_dim", "inter", "block_size",
                                   "kb_hidden", "kb_heads", "kb_inter")),
        ("eps", F32), ("scale", F32), ("layers", ctypes.POINTER(Layer)), ("final_norm", P),
        *((name, P) for name in ("rms_norm", "rope_write_kv", "decode_attention", "prefill_attention", "linear",
                                 "linear_swiglu", "qk_norm")),
        ("weights", ctypes.POINTER(StackWeight)), ("quant_linear", P), ("silu_mul", P), ("linear_scaled", P),
    ]


class StackStep(ctypes.Structure):
    """cpu_stack.c's stack_step."""

    _fields_ = [
        ("tokens", I64), ("num_decodes", I32), ("num_prefills", I32),
        ("h", P), ("out", P), ("cos_sin", P), ("slots", P),
        ("decode_tables", P), ("decode_lens", P), ("decode_stride", I64),
        ("prefill_tables", P), ("prefill_starts", P), ("prefill_lens", P), ("prefill_stride", I64),
        *((name, P) for name in ("x", "qkv", "q", "att", "act", "pending", "gate_up")),
    ]


class DraftModel(ctypes.Structure):
    """cpu_draft.c's draft_model."""

    _fields_ = [
        *((name, I32) for name in ("num_layers", "hidden", "heads", "kv_heads", "head_dim", "inter", "block_size",
                                   "max_positions", "vocab")),
        ("eps", F32), ("scale", F32), ("embed", P), ("final_norm", P), ("cos_sin", P),
        ("layers", ctypes.POINTER(Layer)),
        *((name, P) for name in ("rms_norm", "silu_mul", "rope_write_kv", "attention", "qk_norm")),
    ]


# ---- the libraries ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)  # hashed by identity: a cheap key for `load`
class Library:
    """One C file of this folder: what it is called in the log, its entry points, and the structs
    it exports sizes for (the `fg_sizeof_*` function, the Python mirror)."""

    source: str
    what: str
    entries: tuple[Entry, ...]
    structs: tuple[tuple[str, type[ctypes.Structure]], ...] = ()


ATTENTION = Library("cpu_attention.c", "native CPU kernels", (
    fn("paged_decode_attention", I32, query=P, k_cache=P, v_cache=P, block_tables=P, table_stride=I64, seq_lens=P,
       out=P, num_seqs=I32, num_heads=I32, num_kv_heads=I32, head_dim=I32, block_size=I32, scale=F32,
       kv_dtype=I32, num_threads=I32, k_scale=P, v_scale=P),
    fn("paged_prefill_attention", I32, query=P, k_cache=P, v_cache=P, block_tables=P, table_stride=I64,
       query_start=P, seq_lens=P, out=P, num_seqs=I32, num_heads=I32, num_kv_heads=I32, head_dim=I32,
       block_size=I32, scale=F32, num_threads=I32),
    # the same over each query's last `window` positions (Gemma 3's sliding layers; 0: all of them)
    fn("paged_decode_attention_windowed", I32, query=P, k_cache=P, v_cache=P, block_tables=P, table_stride=I64,
       seq_lens=P, out=P, num_seqs=I32, num_heads=I32, num_kv_heads=I32, head_dim=I32, block_size=I32, scale=F32,
       kv_dtype=I32, num_threads=I32, k_scale=P, v_scale=P, window=I32),
    fn("paged_prefill_attention_windowed", I32, query=P, k_cache=P, v_cache=P, block_tables=P, table_stride=I64,
       query_start=P, seq_lens=P, out=P, num_seqs=I32, num_heads=I32, num_kv_heads=I32, head_dim=I32,
       block_size=I32, scale=F32, num_threads=I32, window=I32),
))
FUSED = Library("cpu_fused.c", "native fused CPU kernels", (
    fn("rms_norm", None, x=P, residual=P, weight=P, out=P, rows=I64, n=I32, eps=F32, num_threads=I32),
    fn("silu_mul", None, gate_up=P, out=P, rows=I64, inter=I32, num_threads=I32),
    fn("qk_norm", None, qkv=P, q_weight=P, k_weight=P, tokens=I64, heads=I32, kv_heads=I32, head_dim=I32, eps=F32,
       num_threads=I32),
    fn("argmax_rows", None, x=P, out=P, rows=I64, n=I64, row_stride=I64, num_threads=I32),
    fn("rope_write_kv", None, qkv=P, cos_sin=P, slots=P, q_out=P, k_cache=P, v_cache=P, tokens=I64, heads=I32,
       kv_heads=I32, head_dim=I32, num_threads=I32),
))
GEMM = Library("cpu_gemm.c", "native panel linears", (
    fn("exact_linear", None, x=P, M=I64, K=I32, panels=P, N=I32, bias=P, y=P, kb=I32, num_threads=I32),
    fn("exact_linear_swiglu", I32, x=P, M=I64, K=I32, panels=P, N=I32, bias=P, y=P, kb=I32, num_threads=I32),
    fn("exact_linear_scaled", None, x=P, M=I64, K=I32, panels=P, N=I32, scale=P, bias=P, y=P, num_threads=I32),
))
QUANT = Library("cpu_quant.c", "native quantized linears", (
    fn("quant_linear", None, x=P, x_stride=I64, w=P, scale=P, minimum=P, bias=P, y=P, y_stride=I64, M=I32, N=I32,
       K=I32, group=I32, kind=I32, num_threads=I32),
    fn("quant_unpack", None, w=P, scale=P, minimum=P, out=P, N=I32, K=I32, group=I32, kind=I32),
    fn("quant_amx_path", I32, K=I32),
))
QUANT_A8 = Library("cpu_quant_a8.c", "native int8 x int8 linears", (
    fn("quant_linear_a8", I32, x=P, x_stride=I64, w=P, scale=P, colsum=P, bias=P, y=P, y_stride=I64, M=I32, N=I32,
       K=I32, num_threads=I32),
    fn("quant_a8_path", I32),
))
STACK = Library("cpu_stack.c", "native decoder stack", (
    fn("stack_forward", I32, m=P, s=P, num_threads=I32),
), (("fg_sizeof_stack_layer", Layer), ("fg_sizeof_stack_model", StackModel), ("fg_sizeof_stack_step", StackStep),
    ("fg_sizeof_stack_weight", StackWeight)))
DRAFT = Library("cpu_draft.c", "native draft decode round", (
    fn("draft_decode_round", I32, m=P, ids=P, positions=P, cos_sin=P, slots=P, seq_lens=P, block_tables=P,
       table_stride=I64, batch=I32, out=P, num_threads=I32),
), (("fg_sizeof_draft_layer", Layer), ("fg_sizeof_draft_model", DraftModel)))
GREEDY = Library("cpu_greedy.c", "native greedy LM head", (
    fn("greedy_tokens", I32, x=P, M=I64, K=I32, wbf=P, w32=P, w_norm_max=F64, N=I32, kb=I32, c=F64,
       slack=F64, tokens=P, scratch=P, num_threads=I32),
    fn("greedy_screen", I32, K=I32),
))
LIBRARIES = (ATTENTION, FUSED, GEMM, QUANT, QUANT_A8, STACK, DRAFT, GREEDY)


def open_library(spec: Library, extra_flags: tuple[str, ...] = ()) -> ctypes.CDLL:
    """`spec` built (with `extra_flags` too), loaded, declared and checked; raises on any failure."""
    lib = ctypes.CDLL(str(build_library(FOLDER / spec.source, extra_flags)))
    for entry in spec.entries:
        f = getattr(lib, entry.name)
        f.restype = entry.returns
        f.argtypes = [ctype for _, ctype in entry.params]
    check(lib, spec)
    return lib


def check(lib: ctypes.CDLL, spec: Library) -> None:
    """Raise `ABIError` where the library's constants or struct sizes differ from this module's."""
    for name, mine in (("fg_lanes", LANES), ("fg_panel", PANEL)):
        f = getattr(lib, name)
        f.restype, f.argtypes = I32, []
        if f() != mine:
            raise ABIError(f"{spec.source} was built with {name[3:].upper()} = {f()}, kernels/native/abi.py has {mine}")
    for name, mirror in spec.structs:
        f = getattr(lib, name)
        f.restype, f.argtypes = SIZE, []
        if f() != ctypes.sizeof(mirror):
            raise ABIError(f"{spec.source}'s {name[len('fg_sizeof_'):]} is {f()} bytes, its mirror "
                           f"kernels/native/abi.py {mirror.__name__} {ctypes.sizeof(mirror)}: update the mirror")


@functools.cache
def _loaded(spec: Library, extra_flags: tuple[str, ...]) -> tuple[ctypes.CDLL | None, str | None]:
    try:
        return open_library(spec, extra_flags), None
    except ABIError:
        raise
    except Exception as exc:  # noqa: BLE001 - any other failure means "use the slower path"
        why = f"{type(exc).__name__}: {exc}"
        log.warning("%s unavailable (%s)", spec.what, why)
        return None, why


def load(spec: Library, extra_flags: tuple[str, ...] = ()) -> ctypes.CDLL | None:
    """The library of `spec`, built and loaded once per process; None (logged once) where it
    cannot be built or loaded here. `extra_flags` (e.g. ("-mno-avx512f",)) build a narrower
    instruction path of it, for tests."""
    return _loaded(spec, extra_flags)[0]


def why_not(spec: Library, extra_flags: tuple[str, ...] = ()) -> str | None:
    """Why `load(spec)` gave None (None where it loaded)."""
    return _loaded(spec, extra_flags)[1]


def forget() -> None:
    """Load every library afresh on next use (tests that change the compiler or the cache)."""
    _loaded.cache_clear()


def address(lib: ctypes.CDLL, name: str) -> int:
    """The address of one of `lib`'s functions, for a program's table of kernels."""
    value = ctypes.cast(getattr(lib, name), P).value
    assert value is not None
    return value
