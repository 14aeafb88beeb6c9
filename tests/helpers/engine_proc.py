"""`fairgate engine` as a real process on loopback, for end-to-end tests."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def engine_server(model_dir: Path, *args: str) -> Iterator[str]:
    """Start the engine on a free port; yield its base URL; stop it on exit."""
    cmd = [sys.executable, "-m", "gateway.cli", "engine", "--model", str(model_dir), "--port", "0", *args]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = None
        for line in proc.stdout:  # type: ignore[union-attr]
            if line.startswith("fairgate engine listening on "):
                url = line.split(" on ", 1)[1].strip()
                break
        assert url, "the engine server exited before listening"
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()
