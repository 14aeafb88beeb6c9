"""The native CPU kernels (cpu_attention.c, cpu_quant.c, cpu_quant_a8.c, cpu_draft.c, cpu_stack.c,
cpu_greedy.c): each built with the
system C compiler at first use, loaded with ctypes, called on torch tensors' memory.

The library is cached under $FAIRGATE_KERNEL_CACHE (default ~/.cache/fairgate/kernels), keyed
by the source, the compiler, its flags and this CPU's feature flags (it is built for the
CPU it runs on). Builds go to a temporary name and are renamed into place, so concurrent
processes never load a half-written file. No compiler, or a failed build, means `load()`
returns None and the caller keeps the torch reference path.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch

from fairgate.kernels import reference

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("cpu_attention.c")
QUANT_SOURCE = Path(__file__).with_name("cpu_quant.c")
QUANT_A8_SOURCE = Path(__file__).with_name("cpu_quant_a8.c")
DRAFT_SOURCE = Path(__file__).with_name("cpu_draft.c")
STACK_SOURCE = Path(__file__).with_name("cpu_stack.c")
GREEDY_SOURCE = Path(__file__).with_name("cpu_greedy.c")
FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=gnu11")
KV_DTYPE_CODES = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2, torch.int8: 3, torch.uint8: 4}
LANES = 16  # head_dim must be a multiple (cpu_attention.c's vector width)


def cache_dir() -> Path:
    env = os.environ.get("FAIRGATE_KERNEL_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fairgate" / "kernels"


def _cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return line
    except OSError:
        pass
    return platform.processor()


def _compiler() -> str | None:
    return shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")


@functools.cache
def load() -> ctypes.CDLL | None:
    """The built attention library, or None (logged once) when it cannot be built or loaded here."""
    try:
        return _load()
    except Exception as exc:  # noqa: BLE001 - any failure means "use the torch path"
        log.warning("native CPU kernels unavailable (%s: %s); using the torch reference", type(exc).__name__, exc)
        return None


def _load(extra_flags: tuple[str, ...] = ()) -> ctypes.CDLL:
    """The attention library built with `extra_flags` too (tests build the AVX2 one on any x86 CPU)."""
    lib = ctypes.CDLL(str(build_library(SOURCE, extra_flags)))
    fn = lib.paged_decode_attention
    fn.restype = ctypes.c_int
    p, i32, i64, f32 = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_float
    fn.argtypes = [p, p, p, p, i64, p, p, i32, i32, i32, i32, i32, f32, i32, i32, p, p]
    lib.paged_prefill_attention.restype = ctypes.c_int
    lib.paged_prefill_attention.argtypes = [p, p, p, p, i64, p, p, p, i32, i32, i32, i32, i32, f32, i32]
    return lib


@functools.cache
def load_quant() -> ctypes.CDLL | None:
    """The built quantized-linear library (cpu_quant.c), or None (logged once)."""
    lib = open_library(QUANT_SOURCE, "native quantized linears")
    if lib is None:
        return None
    fn = lib.quant_linear
    fn.restype = None
    p, i32, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64
    fn.argtypes = [p, i64, p, p, p, p, p, i64, i32, i32, i32, i32, i32, i32]
    return lib


@functools.cache
def load_quant_a8(extra_flags: tuple[str, ...] = ()) -> ctypes.CDLL | None:
    """The built int8 x int8 linear library (cpu_quant_a8.c), or None (logged once).

    `extra_flags` (e.g. ("-mno-avx512f",)) build a narrower instruction path of it, for tests."""
    lib = open_library(QUANT_A8_SOURCE, "native int8 x int8 linears", extra_flags)
    if lib is None:  # the weight-only path then
        return None
    p, i32, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64
    lib.quant_linear_a8.restype = ctypes.c_int
    lib.quant_linear_a8.argtypes = [p, i64, p, p, p, p, p, i64, i32, i32, i32, i32]
    lib.quant_a8_path.restype = ctypes.c_int
    lib.quant_a8_path.argtypes = []
    return lib


@functools.cache
def load_draft() -> ctypes.CDLL | None:
    """The built draft decode-round library (cpu_draft.c), or None (logged once)."""
    lib = open_library(DRAFT_SOURCE, "native draft decode round")
    if lib is None:  # the per-op path then
        return None
    p, i32, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64
    lib.draft_decode_round.restype = ctypes.c_int
    lib.draft_decode_round.argtypes = [p, p, p, p, p, p, p, i64, i32, p, i32]
    return lib


@functools.cache
def load_stack() -> ctypes.CDLL | None:
    """The built one-call decoder stack (cpu_stack.c), or None (logged once)."""
    lib = open_library(STACK_SOURCE, "native decoder stack")
    if lib is None:  # the per-op path then
        return None
    lib.stack_forward.restype = ctypes.c_int
    lib.stack_forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    return lib


@functools.cache
def load_greedy(extra_flags: tuple[str, ...] = ()) -> ctypes.CDLL | None:
    """The built greedy LM-head library (cpu_greedy.c), or None (logged once). `extra_flags`
    (e.g. ("-mno-avx512bf16",)) build its portable screen, for tests."""
    lib = open_library(GREEDY_SOURCE, "native greedy LM head", extra_flags)
    if lib is None:  # full logits then
        return None
    p, i32, i64, f64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_double
    lib.greedy_tokens.restype = ctypes.c_int
    lib.greedy_tokens.argtypes = [p, i64, i32, p, p, f64, i32, i32, f64, f64, p, p, i32]
    lib.greedy_screen.restype = ctypes.c_int
    lib.greedy_screen.argtypes = [i32]
    return lib


def open_library(source_path: Path, what: str, extra_flags: tuple[str, ...] = ()) -> ctypes.CDLL | None:
    """`source_path` built (see `build_library`) and loaded; None, with a warning naming `what`,
    when it cannot be here (the caller falls back to a slower path)."""
    try:
        return ctypes.CDLL(str(build_library(source_path, extra_flags)))
    except Exception as exc:  # noqa: BLE001 - any failure means "use the fallback"
        log.warning("%s unavailable (%s: %s)", what, type(exc).__name__, exc)
        return None


def build_library(source_path: Path, extra_flags: tuple[str, ...] = ()) -> Path:
    """Compile `source_path` for this CPU once (cached by content); return the library's path."""
    cc = _compiler()
    if cc is None:
        raise RuntimeError("no C compiler (cc or gcc) on PATH")
    source = source_path.read_bytes()
    flags = (*FLAGS, *extra_flags)
    key = hashlib.sha256(b"\0".join([source, cc.encode(), " ".join(flags).encode(),
                                     platform.machine().encode(), _cpu_flags().encode()])).hexdigest()[:16]
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:  # e.g. a read-only home: a private folder in the temp dir will do
        folder = Path(tempfile.gettempdir()) / f"fairgate-kernels-{os.getuid()}"
        folder.mkdir(mode=0o700, exist_ok=True)
    target = folder / f"{source_path.stem}-{key}.so"
    if not target.exists():
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
        os.close(fd)
        try:
            done = subprocess.run([cc, *flags, str(source_path), "-o", tmp, "-lm"], capture_output=True, text=True,
                                  timeout=120, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"{cc} failed: {done.stderr.strip()[-400:]}")
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        log.info("built native CPU kernels: %s", target)
    # torch is imported above, so the library's libgomp.so.1 resolves to the OpenMP runtime
    # torch already loaded: one thread pool, not two competing for the cores.
    return target


def paged_decode_attention(
    query: torch.Tensor,  # [num_seqs, num_heads, head_dim]
    k_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_dim]
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,  # [num_seqs, max_blocks] int32
    seq_lens: torch.Tensor,  # [num_seqs] int32, >= 1
    scale: float,
    max_seq_len: int | None = None,
    k_scale: torch.Tensor | None = None,  # [num_blocks, block_size, num_kv_heads, 1 | 2] float16
    v_scale: torch.Tensor | None = None,
) -> torch.Tensor:  # [num_seqs, num_heads, head_dim]
    """Same contract as `kernels.reference.paged_decode_attention`; the library must load."""
    num_seqs, num_heads, head_dim = query.shape
    if num_seqs == 0:
        return query.new_empty(query.shape)
    if head_dim % LANES:  # the kernel works in 16-lane vectors; odd sizes take the torch path
        return reference.paged_decode_attention(query, k_cache, v_cache, block_tables, seq_lens, scale,
                                                max_seq_len, k_scale, v_scale)
    lib = load()
    if lib is None:
        raise RuntimeError("native CPU kernels are not available")
    _, block_size, num_kv_heads, cache_dim = k_cache.shape
    packed = 2 if k_cache.dtype == torch.uint8 else 1  # 4-bit codes: two per byte
    if (
        k_cache.device.type != "cpu" or not k_cache.is_contiguous() or not v_cache.is_contiguous()
        or v_cache.shape != k_cache.shape or v_cache.dtype != k_cache.dtype or cache_dim * packed != head_dim
        or num_heads % num_kv_heads or k_cache.dtype not in KV_DTYPE_CODES
        or not _scales_fit(k_cache, k_scale) or not _scales_fit(k_cache, v_scale)
    ):
        raise ValueError("paged_decode_attention: cache tensors do not match the native kernel's layout")
    q = query.to(torch.float32).contiguous()
    tables = block_tables.to(torch.int32).contiguous()
    lens = seq_lens.to(torch.int32).contiguous()
    out = torch.empty_like(q)
    rc = lib.paged_decode_attention(
        q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), tables.data_ptr(), tables.stride(0),
        lens.data_ptr(), out.data_ptr(), num_seqs, num_heads, num_kv_heads, head_dim, block_size,
        scale, KV_DTYPE_CODES[k_cache.dtype], torch.get_num_threads(),
        0 if k_scale is None else k_scale.data_ptr(), 0 if v_scale is None else v_scale.data_ptr(),
    )
    if rc != 0:
        raise MemoryError("paged_decode_attention: no scratch memory")
    return out if query.dtype == torch.float32 else out.to(query.dtype)


def _scales_fit(cache: torch.Tensor, scales: torch.Tensor | None) -> bool:
    """A quantized cache needs its float16 scales [blocks, block_size, kv_heads, 1 | 2]; a float one none."""
    if cache.dtype not in (torch.int8, torch.uint8):
        return scales is None
    width = 1 if cache.dtype == torch.int8 else 2
    return (scales is not None and scales.dtype == torch.float16 and scales.is_contiguous()
            and tuple(scales.shape) == (*cache.shape[:3], width))


def paged_prefill_attention(
    query: torch.Tensor,  # [num_tokens, num_heads, head_dim]
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,  # [num_seqs, max_blocks] int32
    query_start_loc: torch.Tensor,  # [num_seqs + 1] int32
    seq_lens: torch.Tensor,  # [num_seqs] int32
    scale: float,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> torch.Tensor:  # [num_tokens, num_heads, head_dim]
    """Same contract as `kernels.reference.paged_prefill_attention`: natively for a float32
    cache (cpu_attention.c: no gather, no mask tensor, every sequence in one call), the
    reference (torch's SDPA per sequence) for anything else."""
    num_tokens, num_heads, head_dim = query.shape
    fits = (
        k_scale is None and query.dtype == k_cache.dtype == v_cache.dtype == torch.float32
        and head_dim % LANES == 0 and head_dim <= 128 and k_cache.device.type == "cpu" and k_cache.is_contiguous()
        and v_cache.is_contiguous() and num_heads % k_cache.shape[2] == 0 and k_cache.shape[3] == head_dim
        and v_cache.shape == k_cache.shape
    )
    lib = load() if fits else None
    if lib is None:
        return reference.paged_prefill_attention(query, k_cache, v_cache, block_tables, query_start_loc, seq_lens,
                                                 scale, k_scale, v_scale)
    q = query.contiguous()
    tables = block_tables.to(torch.int32).contiguous()
    starts = query_start_loc.to(torch.int32).contiguous()
    lens = seq_lens.to(torch.int32).contiguous()
    out = torch.empty_like(q)
    rc = lib.paged_prefill_attention(
        q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), tables.data_ptr(), tables.stride(0), starts.data_ptr(),
        lens.data_ptr(), out.data_ptr(), lens.shape[0], num_heads, k_cache.shape[2], head_dim, k_cache.shape[1],
        scale, torch.get_num_threads(),
    )
    if rc != 0:
        raise MemoryError("paged_prefill_attention: no scratch memory")
    return out
