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


def _free_ports(n: int) -> list[int]:
    # a cluster node also listens on port + 10000 (its bus): keep both free and below 55536
    ports: list[int] = []
    while len(ports) < n:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if p > 55000 or p in ports:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", p + 10000))
            except OSError:
                continue
        ports.append(p)
    return ports


def missing_reason() -> str | None:
    for tool in ("redis-server", "redis-cli"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install redis-server)"
    return None


@contextlib.contextmanager
def redis_cluster(workdir: Path, nodes: int = 3) -> Iterator[list[str]]:
    """Start `nodes` masters with cluster-enabled, join them (`redis-cli --cluster create`),
    wait for cluster_state:ok; yield their URLs; stop them."""
    ports = _free_ports(nodes)
    procs = []
    try:
        for p in ports:
            d = workdir / f"node-{p}"
            d.mkdir(parents=True)
            procs.append(subprocess.Popen(
                ["redis-server", "--port", str(p), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                 "--cluster-config-file", str(d / "nodes.conf"), "--dir", str(d), "--save", "",
                 "--appendonly", "no", "--protected-mode", "no"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for p in ports:
            wait_for(lambda p=p: _cli(p, "PING") == "PONG", what="redis cluster did not come up")
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


def _cli(port: int, *args: str) -> str:
    out = subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True, timeout=10)
    return out.stdout.strip()


