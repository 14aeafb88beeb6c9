"""`fairgate engine` as a real process: start it, read where it listens, stop it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.helpers.procs import stop_process

ROOT = Path(__file__).resolve().parents[2]


class EngineProcess:
    """`EngineProcess(model_dir, "--api-key", "k")` → `.url` once it listens. `prefix` runs it
    under another command (e.g. `ip netns exec NS`)."""

    def __init__(self, model_dir: Path | str, *args: str, name: str = "tiny", port: int = 0,
                 host: str = "127.0.0.1", prefix: tuple[str, ...] = (), env: dict[str, str] | None = None) -> None:
        self.cmd = [*prefix, sys.executable, "-m", "fairgate.gateway.cli", "engine", "--model", str(model_dir),
                    "--served-model-name", name, "--host", host, "--port", str(port),
                    "--num-kv-blocks", "128", "--max-model-len", "256", "--max-num-batched-tokens", "128", *args]
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.output: list[str] = []

    def start(self) -> EngineProcess:
        self.proc = subprocess.Popen(self.cmd, cwd=ROOT, env=self.env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)
            if line.startswith("fairgate engine listening on "):
                self.url = line.split(" on ", 1)[1].strip()
                return self
        self.proc.wait()
        raise RuntimeError("engine exited before listening: " + "".join(self.output[-20:]))

    def stop(self) -> None:
        if self.proc is None:
            return
        stop_process(self.proc)
        if self.proc.stdout:
            self.proc.stdout.close()
        self.proc = None

    def __enter__(self) -> EngineProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def engine_server(model_dir: Path, *args: str) -> Iterator[str]:
    """Start the engine on a free port with `args` (they override EngineProcess's defaults);
    yield its base URL; stop it on exit."""
    with EngineProcess(model_dir, *args) as proc:
        yield proc.url
