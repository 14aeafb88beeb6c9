"""The deployment files stay in step with the code: the fleet files parse with the declarative
parser, the compose file's services are the documented ones, and the Dockerfile copies every
package of the project."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from gateway.declarative import parse

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
    packages = set(re.findall(r'include = \[(.*?)\]', (ROOT / "pyproject.toml").read_text())[0].replace('"', "")
                   .replace("*", "").replace(" ", "").split(","))
    for target in ("cpu", "cuda"):
        stage = text.split(f" AS {target}")[1].split("\nFROM ")[0]
        assert packages <= set(re.findall(r"^COPY (\w+) ", stage, re.M)), target
