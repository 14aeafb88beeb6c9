"""Busy neighbours for the engine benchmarks (issue 39): the engine keeps its speed only if it
tolerates a core taken away, which is the normal case on a shared machine.

`busy_threads(n)`: n pure-Python loops in this process, as the gateway's event loop, detectors
and writers run beside an embedded engine (they take a core and, between switches, the GIL).
`busy_processes(n)`: n separate spinning processes, for servers (ours and vLLM alike).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from collections.abc import Iterator


def _spin(stop: threading.Event) -> None:
    x = 0
    while not stop.is_set():
        for _ in range(10_000):
            x += 1


@contextlib.contextmanager
def busy_threads(n: int) -> Iterator[None]:
    stop = threading.Event()
    threads = [threading.Thread(target=_spin, args=(stop,), daemon=True, name=f"neighbour-{i}") for i in range(n)]
    for t in threads:
        t.start()
    try:
        yield
    finally:
        stop.set()
        for t in threads:
            t.join()


@contextlib.contextmanager
def busy_processes(n: int) -> Iterator[None]:
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()
