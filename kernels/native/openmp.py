"""The process's OpenMP runtime: the libgomp torch loads, which the native kernels share.

libgomp keeps a pool of worker threads for each thread that has run a parallel region, and it
counts every pool's threads together. When they outnumber the CPUs it "throttles": a thread
waiting at a barrier spins about 100 times, instead of 300,000, before it sleeps in the kernel.
Loading a model runs torch ops in the loading thread, which leaves a pool behind there; the
engine thread's own pool then makes the count exceed a 2-core machine's CPUs, and each of a
step's ~100 parallel regions cost both threads a futex sleep and a wake-up (the 110m benchmark:
~25,000 sleeps per thread per pass, 8-12% of the cores idle; ~100 and 3% once the loading
thread's pool is released).

`release_pool()` frees the calling thread's pool (OpenMP 5.0's `omp_pause_resource_all`, soft):
its workers exit, and a later parallel region in that thread would simply make a new one.
"""

from __future__ import annotations

import ctypes
import functools
import logging
from pathlib import Path

log = logging.getLogger(__name__)

OMP_PAUSE_SOFT = 1


@functools.cache
def _libgomp() -> ctypes.CDLL | None:
    """The libgomp already mapped into this process (torch's), or None (another runtime, or none)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)  # address, perms, offset, device, inode[, path]
        path = fields[5] if len(fields) == 6 else ""
        if Path(path).name.startswith("libgomp"):
            try:
                lib = ctypes.CDLL(path)
                lib.omp_pause_resource_all.argtypes = [ctypes.c_int]
                lib.omp_pause_resource_all.restype = ctypes.c_int
                return lib
            except (OSError, AttributeError):
                return None
    return None


def release_pool() -> bool:
    """Free the calling thread's OpenMP worker pool; True where libgomp did it. Call it outside
    any parallel region, from a thread that is done with parallel work for now (one that has
    loaded a model for an engine thread to run)."""
    lib = _libgomp()
    if lib is None:
        return False
    ok = lib.omp_pause_resource_all(OMP_PAUSE_SOFT) == 0
    if not ok:
        log.debug("libgomp refused to release this thread's pool")
    return ok


__all__ = ["release_pool"]
