"""A real three-node Redis Cluster on free loopback ports, started and stopped by a test."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.helpers.procs import wait_or_kill
from tests.helpers.rows import wait_for


def _free_port(taken: list[int]) -> int:
    # a cluster node also listens on port + 10000 (its bus): keep both free and below 55536
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if p > 55000 or p in taken:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", p + 10000))
            except OSError:
                continue
        return p


def missing_reason() -> str | None:
    for tool in ("redis-server", "redis-cli"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install redis-server)"
    return None


@contextlib.contextmanager
def redis_cluster(workdir: Path, nodes: int = 3) -> Iterator[list[str]]:
    """Start `nodes` masters with cluster-enabled, join them (`redis-cli --cluster create`),
    wait for cluster_state:ok; yield their URLs; stop them."""
    ports: list[int] = []
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(nodes):
            port, proc = _start_node(workdir, ports)
            ports.append(port)
            procs.append(proc)
        subprocess.run(["redis-cli", "--cluster", "create", *(f"127.0.0.1:{p}" for p in ports),
                        "--cluster-replicas", "0", "--cluster-yes"], check=True, capture_output=True, timeout=60)
        for p in ports:
            wait_for(lambda p=p: "cluster_state:ok" in _cli(p, "CLUSTER", "INFO"), what="redis cluster did not come up")
        yield [f"redis://127.0.0.1:{p}/0" for p in ports]
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            wait_or_kill(proc, 10)


def _start_node(workdir: Path, taken: list[int], tries: int = 5) -> tuple[int, subprocess.Popen[bytes]]:
    """A cluster-enabled redis-server on a free port, answering PING. A port found free can be
    taken before the server binds it (another process's outgoing connection): the server then
    exits, and the node starts again on another port. Its log says why, if it never comes up."""
    for _ in range(tries):
        port = _free_port(taken)
        d = workdir / f"node-{port}"
        d.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
             "--cluster-config-file", str(d / "nodes.conf"), "--dir", str(d), "--save", "",
             "--appendonly", "no", "--protected-mode", "no", "--logfile", str(d / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda p=port, proc=proc: proc.poll() is not None or _cli(p, "PING") == "PONG")
        except AssertionError:
            wait_or_kill(proc, 0)
            raise AssertionError(f"redis node on {port} neither answered nor exited; log: {_log_tail(d)}") from None
        if proc.poll() is None:
            return port, proc
    raise AssertionError(f"redis node did not start in {tries} tries; last log: {_log_tail(d)}")


def _log_tail(folder: Path) -> str:
    log = folder / "redis.log"
    return " | ".join(log.read_text(errors="replace").splitlines()[-3:]) if log.exists() else "(none)"


def _cli(port: int, *args: str) -> str:
    try:
        out = subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True, timeout=5)
    except subprocess.TimeoutExpired:
        return ""  # something else holds the port and does not answer
    return out.stdout.strip()


