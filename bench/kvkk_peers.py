"""Other offline Turkish PII detectors as same-run peers on the realistic set, each installed in
its own venv (so their dependencies never meet ours): `$FAIRGATE_PII_PEERS_DIR/<name>/bin/python`
(default `bench/.peers/<name>`), running `bench/peer_adapters/peer_<name>.py`, which reads the rows'
texts as JSON lines on stdin and writes one JSON list of [kind, start, end] per line.

A peer with no venv or no adapter is skipped with the reason. Kinds a peer names differently
are mapped by its adapter onto ours.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from bench.kvkk_real import score_rows

PEERS = ("kvkk", "kvkk-pii", "telveguard-core", "guardllm-tr", "hushmark-core", "presidio-analyzer", "ayikla")
HERE = Path(__file__).resolve().parent


def run_peers(rows: list[dict], timeout_s: float = 600.0) -> dict[str, dict]:
    venvs = Path(os.environ.get("FAIRGATE_PII_PEERS_DIR", HERE / ".peers"))
    out: dict[str, dict] = {}
    for name in PEERS:
        python = venvs / name / "bin" / "python"
        adapter = HERE / "peer_adapters" / f"peer_{name.replace('-', '_')}.py"
        if not python.exists():
            out[name] = {"skipped": f"no venv at {python.parent.parent} (pip install {name} there)"}
            continue
        if not adapter.exists():
            out[name] = {"skipped": f"no adapter {adapter.relative_to(HERE.parent)}"}
            continue
        stdin = "".join(json.dumps(r["text"]) + "\n" for r in rows)
        try:
            proc = subprocess.run([str(python), str(adapter)], input=stdin, capture_output=True, text=True,
                                  timeout=timeout_s, check=True)
        except (subprocess.SubprocessError, OSError) as exc:
            out[name] = {"skipped": f"failed: {exc!s:.200}"}
            continue
        answers = {r["text"]: [tuple(f) for f in json.loads(line)]
                   for r, line in zip(rows, proc.stdout.splitlines(), strict=True)}
        out[name] = score_rows(rows, answers.__getitem__)
    return out
