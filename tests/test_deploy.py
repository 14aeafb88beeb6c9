"""The deployment files stay in step with the code: the fleet files parse with the declarative
parser, the compose file's services are the documented ones, and the Dockerfile copies every
package of the project."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

from fairgate.gateway.config.declarative import parse

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("path", ["deploy/fleet.yaml", "deploy/k8s/fleet.yaml"])
def test_fleet_files_parse(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRGATE_ENGINE_API_KEY", "k")
    declared = parse(yaml.safe_load((ROOT / path).read_text()))
    assert declared.config.pools and all(p.api_key == "k" and p.replicas for p in declared.config.pools)


def test_compose_has_two_gateways_an_engine_and_the_stores() -> None:
    compose = yaml.safe_load((ROOT / "deploy/compose.yaml").read_text())
    assert set(compose["services"]) == {"postgres", "redis", "engine-0", "gateway-a", "gateway-b", "prometheus"}
    prom = yaml.safe_load((ROOT / "deploy/prometheus.yml").read_text())
    targets = [t for job in prom["scrape_configs"] for c in job["static_configs"] for t in c["targets"]]
    assert targets == ["gateway-a:8000", "gateway-b:8000", "engine-0:8100"]


def test_dockerfile_copies_every_package() -> None:
    text = (ROOT / "Dockerfile").read_text()
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    rooms = {name.split(".")[1] for name in listed if name.count(".") == 1}
    assert rooms == {"gateway", "policies", "scheduler", "backends", "kernels", "migrations"}
    stage = text.split(" AS wheel")[1].split("\nFROM ")[0]  # the one stage that builds the package
    assert rooms <= set(re.findall(r"^COPY (\w+) ", stage, re.M))
    for name in re.findall(r"^COPY ([\w.]+(?: [\w.]+)*) \./$", stage, re.M)[0].split():
        assert (ROOT / name).is_file(), name  # a file the build context does not have fails the build
    for target in ("cpu", "cuda"):  # both images install that wheel
        image = text.split(f" AS {target}")[1].split("\nFROM ")[0]
        assert "COPY --from=wheel /dist/ /tmp/dist/" in image and "install /tmp/dist/fairgate-*.whl" in image, target


def test_cpu_image_carries_a_c_compiler() -> None:
    # The native kernels are compiled with -march=native where the engine runs: without a compiler
    # in the image the engine would run the torch reference path.
    stage = (ROOT / "Dockerfile").read_text().split(" AS cpu")[1].split("\nFROM ")[0]
    assert re.search(r"apt-get install[^\n]*\bgcc\b[^\n]*\blibgomp1\b", stage)


def test_engine_commands_parse_and_pin_their_compute_cores() -> None:
    """The engines the deployment files start are valid `fairgate engine` command lines, with the
    compute threads on cores of their own (--cpu-cores auto); the Kubernetes engine pod asks for
    whole CPUs with requests equal to limits (Guaranteed: the static CPU manager gives it cores)."""
    from fairgate.backends.local.engine.config import EngineConfig
    from fairgate.gateway.cli import build_parser

    compose = yaml.safe_load((ROOT / "deploy/compose.yaml").read_text())
    statefulset = next(d for d in yaml.safe_load_all((ROOT / "deploy/k8s/engine.yaml").read_text())
                       if d and d["kind"] == "StatefulSet")
    container = statefulset["spec"]["template"]["spec"]["containers"][0]
    for argv in (compose["services"]["engine-0"]["command"], container["args"]):
        config = EngineConfig.from_args(build_parser().parse_args(argv))
        config.validate()
        assert config.cpu_cores == "auto"
    resources = container["resources"]
    assert resources["requests"] == resources["limits"] and str(resources["limits"]["cpu"]).isdigit()
