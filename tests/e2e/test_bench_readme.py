"""The README's own `fairgate bench` example, run as written against what it names: a gateway
serving the embedded demo model on one port and `fairgate engine` with the demo model on another,
two tenant keys. Only the ports, the keys, the output folder and the duration (30 s → a fraction
of a second per load point) are changed. Issue 37: sent as sized, the `rag` prompt (~2,300 tokens)
overflows the demo model's 512-token context and every request was a 400; the bench now fits the
workload to the `max_model_len` both servers list, and the run must have no error at all."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fairgate.backends.local.evaluation.golden import load_golden
from fairgate.gateway.cli import main
from fairgate.gateway.settings import Settings
from tests.gateway.harness import ADMIN_TOKEN, Admin, GatewayThread
from tests.helpers.engine_proc import ROOT, EngineProcess

DEMO = ROOT / "models" / "fairgate-demo"
SECTION = "## Load test any OpenAI-compatible server: `fairgate bench`"


def readme_bench_argv() -> list[str]:
    """The example's arguments, as the README writes them (the program name dropped)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```sh\n(.*?)```", text[text.index(SECTION):], re.DOTALL)
    assert block is not None, "the bench section has no sh example"
    argv = shlex.split(block.group(1).replace("\\\n", " "))
    assert argv[:2] == [".venv/bin/fairgate", "bench"], argv[:2]
    return argv[1:]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    db = tmp_path_factory.mktemp("readme-bench") / "gw.db"
    with EngineProcess(DEMO, "--max-model-len", "512", "--num-kv-blocks", "512", "--max-num-batched-tokens",
                       "512", name="fairgate-demo") as engine, \
            GatewayThread(Settings(admin_token=ADMIN_TOKEN, database_url=f"sqlite:///{db}", model=str(DEMO))) as gw:
        admin = Admin(gw.url)
        keys = [admin.key(admin.tenant(name=f"readme-{t}")["id"])["key"] for t in "ab"]
        yield {"gateway": gw.url, "engine": engine.url, "keys": keys}
        admin.close()


def _as_written_here(argv: list[str], servers: dict[str, Any], out: Path) -> list[str]:
    swap = {"http://127.0.0.1:8000": servers["gateway"], "http://127.0.0.1:8100": servers["engine"],
            "KEY_TENANT_A": servers["keys"][0], "KEY_TENANT_B": servers["keys"][1], "bench-out": str(out)}
    argv = [swap.get(a, a) for a in argv]
    assert set(swap.values()) <= set(argv), "the README example names other servers, keys or folder"
    i = argv.index("--duration")
    return [*argv[: i + 1], "0.5", *argv[i + 2 :]]


def test_the_readme_bench_example_runs_clean_on_the_demo_model(servers: dict[str, Any], tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(ROOT)  # the example's --golden path is relative to the checkout
    argv = _as_written_here(readme_bench_argv(), servers, tmp_path / "bench-out")
    assert "--no-fit" not in argv and "--scale" not in argv
    assert main(argv) == 0
    printed = capsys.readouterr().out
    last = json.loads(printed.strip().splitlines()[-1])
    assert last["errors"] == 0 and last["completed"] > 0, printed
    assert "fits max_model_len 512" in printed and "--no-fit" in printed
    doc = json.loads((tmp_path / "bench-out" / "bench.json").read_text())
    fit = doc["config"]["fit"]
    assert fit["context"] == 512 and fit["scale_asked"] == 1.0 and 0 < fit["scale"] < 1.0
    assert doc["config"]["workload"] == "rag"
    for label, figures in doc["targets"].items():
        assert figures["overall"]["errors"] == 0 and figures["error_messages"] == [], label
        assert [lv for lv, g in figures["levels"].items() if g["completed"] == 0] == [], label
        assert figures["accuracy"]["items"] == len(load_golden(DEMO / "eval" / "golden.jsonl"))
