"""What `pip install fairgate` puts into site-packages: one import name, `fairgate`, beside any ML stack.

The repository keeps its rooms as top-level folders; `pyproject.toml` maps the root to the package
`fairgate`. The last test builds the wheel, installs it into a fresh venv next to the newest
transformers and Hugging Face's `kernels` distribution (whose import name our `kernels/` folder
would take if it were installed at the top level), and serves a completion with the native kernels.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ("gateway", "policies", "scheduler", "backends", "kernels", "migrations")


def listed_packages() -> set[str]:
    return set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])


def test_pyproject_lists_every_package_folder() -> None:
    folders = {
        "fairgate." + ".".join(init.parent.relative_to(ROOT).parts)
        for room in ROOMS for init in (ROOT / room).rglob("__init__.py")
    }
    assert listed_packages() == folders


def test_our_kernels_folder_does_not_shadow_hugging_faces() -> None:
    # tests/conftest.py moves the repository root to the end of sys.path for this reason
    spec = importlib.util.find_spec("kernels")
    if spec is None:
        pytest.skip("Hugging Face's `kernels` distribution is not installed here")
    assert spec.origin is not None and Path(spec.origin).resolve() != ROOT / "kernels" / "__init__.py"


def _pip(venv: Path, *args: str) -> None:
    out = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                          "--disable-pip-version-check", *args], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]


@pytest.mark.timeout(1500)
def test_the_wheel_installs_beside_transformers_and_hf_kernels(tmp_path: Path, tiny_model_dir: Path) -> None:
    # built from a copy, so setuptools' build/ folder lands in tmp_path, not in the checkout
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", "tests", "bench", "tools", "models", "docs"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "-w", str(tmp_path / "dist"), str(src)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("fairgate-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"fairgate", "fairgate-0.1.0.dist-info"}
    assert {"fairgate/kernels/native/cpu_attention.c", "fairgate/kernels/native/fg_common.h",
            "fairgate/migrations/versions/0001_gateway_tables.py"} <= set(names)
    assert not any(n.startswith(("fairgate/tests/", "fairgate/bench/", "fairgate/tools/")) for n in names)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    _pip(venv, "torch==2.13.0")  # the CPU build, from local disk (a bare range would pull CUDA's)
    _pip(venv, str(wheel), "transformers", "kernels")
    probe = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import json, kernels, transformers, fairgate.kernels as ours\n"
         "print(json.dumps([kernels.__file__, ours.__file__, transformers.__version__]))"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert probe.returncode == 0, probe.stderr[-3000:]
    theirs, ours, _version = json.loads(probe.stdout)
    site = venv / "lib"
    assert Path(theirs).is_relative_to(site) and "/fairgate/" not in theirs
    assert Path(ours).is_relative_to(site) and ours.endswith("fairgate/kernels/__init__.py")

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["FAIRGATE_KERNELS"] = "native"  # an error, not a silent fallback, if they do not build
    proc = subprocess.Popen(
        [str(venv / "bin" / "fairgate"), "engine", "--model", str(tiny_model_dir), "--served-model-name", "tiny",
         "--host", "127.0.0.1", "--port", "0", "--num-kv-blocks", "64", "--max-model-len", "128"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        url = ""
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("fairgate engine listening on "):
                url = line.split(" on ", 1)[1].strip()
                break
        assert url, "".join(lines[-30:])
        reply = httpx.post(f"{url}/v1/completions", timeout=120,
                           json={"model": "tiny", "prompt": "Merhaba", "max_tokens": 4, "temperature": 0})
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert body["usage"]["completion_tokens"] == 4 and body["choices"][0]["finish_reason"] == "length"
        assert any("native CPU kernels" in line for line in lines), "".join(lines[-30:])
    finally:
        proc.terminate()
        proc.wait(timeout=30)
