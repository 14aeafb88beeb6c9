"""Stopping a child process the same way everywhere: SIGTERM, a grace period, then SIGKILL."""

from __future__ import annotations

import subprocess
from typing import Any


def wait_or_kill(proc: subprocess.Popen[Any], timeout: float) -> None:
    """Wait up to `timeout` seconds for `proc` to exit (it was asked to already); kill it if not."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def stop_process(proc: subprocess.Popen[Any], timeout: float = 20) -> None:
    """Terminate `proc` and wait for it, killing it after `timeout` seconds."""
    proc.terminate()
    wait_or_kill(proc, timeout)
