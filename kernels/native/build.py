"""Building the native CPU kernels: each C file of this folder compiled with the system C compiler
for the CPU it runs on, once, and cached.

The library is cached under $FAIRGATE_KERNEL_CACHE (default ~/.cache/fairgate/kernels), keyed by
the source and the headers it includes, the compiler (its path and the first line of its
`--version`: an upgraded compiler builds anew), its flags and this CPU's features (x86 `flags`,
aarch64 `Features` of /proc/cpuinfo: a library is built for the CPU it runs on). Builds go to a
temporary name and are renamed into place, so concurrent processes never load a half-written file.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

FOLDER = Path(__file__).parent
FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=gnu11")
# The instruction sets the startup log names ("native: built for avx512f+amx"), in that order.
NAMED_FEATURES = {"avx2": "avx2", "avx512f": "avx512f", "avx512_vnni": "avx512_vnni", "avx512_bf16": "avx512_bf16",
                  "amx_tile": "amx", "asimd": "neon", "asimddp": "dotprod", "sve": "sve", "bf16": "bf16"}


def cache_dir() -> Path:
    env = os.environ.get("FAIRGATE_KERNEL_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fairgate" / "kernels"


def cpu_features(cpuinfo: str | None = None) -> str:
    """This CPU's feature line from /proc/cpuinfo (`cpuinfo`: its text, for tests): x86's
    `flags`, aarch64's `Features`; `platform.processor()` where there is neither."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    for line in cpuinfo.splitlines():
        if line.startswith(("flags", "Features")):
            return line
    return platform.processor()


def instruction_sets(cpuinfo: str | None = None) -> str:
    """The vector instruction sets of this CPU the kernels use, e.g. "avx512f+avx512_bf16+amx"."""
    have = set(cpu_features(cpuinfo).partition(":")[2].split())
    if "avx512f" in have:
        have.discard("avx2")  # implied
    return "+".join(name for flag, name in NAMED_FEATURES.items() if flag in have) or "no vector extensions"


def compiler() -> str | None:
    return shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")


@functools.cache
def compiler_version(cc: str) -> str:
    """The first line of `cc --version` ("" where it says nothing)."""
    try:
        done = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return (done.stdout.strip().splitlines() or [""])[0]


def cache_key(source_path: Path, cc: str, flags: tuple[str, ...]) -> str:
    """What a built library depends on, hashed: the source and this folder's headers, the
    compiler's path and version, the flags, the machine and its CPU features."""
    headers = [p.read_bytes() for p in sorted(FOLDER.glob("*.h"))]
    parts = [source_path.read_bytes(), *headers, cc.encode(), compiler_version(cc).encode(), " ".join(flags).encode(),
             platform.machine().encode(), cpu_features().encode()]
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:16]


def build_library(source_path: Path, extra_flags: tuple[str, ...] = ()) -> Path:
    """Compile `source_path` for this CPU once (cached by `cache_key`); return the library's path."""
    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler (cc or gcc) on PATH")
    flags = (*FLAGS, *extra_flags)
    key = cache_key(source_path, cc, flags)
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
    # torch is imported before any library loads (kernels/native/abi.py), so the library's
    # libgomp.so.1 resolves to the OpenMP runtime torch already loaded: one thread pool, not two.
    return target
