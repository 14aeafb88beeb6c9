"""Declarative configuration: one YAML applied idempotently by `fairgate apply -f`, at start by
`serve --config`, unknown keys refused with their path, secrets from the environment, and
`fairgate export` writing the same format back."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from fairgate.gateway.config.declarative import ConfigError, parse
from fairgate.gateway.settings import load_settings
from tests.gateway.harness import ADMIN_TOKEN, ROOT, free_port

CONFIG = """
settings:
  admin_token: ${ENV:FG_TEST_ADMIN}
backends:
  - name: ext
    kind: openai
    base_url: http://127.0.0.1:9/v1
    model: gpt-x
    api_key: ${ENV:FG_TEST_EXT_KEY}
pools:
  - name: llama
    kind: local
    model: tiny
    policy: affinity
    replicas:
      - {name: gpu0, base_url: "http://127.0.0.1:9/v1"}
      - {name: gpu1, base_url: "http://127.0.0.1:10/v1"}
tenants:
  - name: acme
    weight: 2.0
    quota: {requests_per_minute: 60, max_tokens_per_request: 512}
    sensitivity: {patterns: ["PRJ-[0-9]{4}"], keywords: [Project Zeta], legal_person_data: true}
  - name: globex
    data_residency: local_only
routes:
  - {id: acme-local, match: {tenant: acme}, backend: llama, fallbacks: []}
prices:
  llama: {input_cost_per_mtok: 0.1, output_cost_per_mtok: 0.4, hourly_cost_usd: 4.0}
"""
ENV = {"FG_TEST_ADMIN": ADMIN_TOKEN, "FG_TEST_EXT_KEY": "sk-ext-secret"}


def fairgate(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT),
            "FAIRGATE_SECRETS_KEY": os.environ["FAIRGATE_SECRETS_KEY"], **env}
    return subprocess.run([sys.executable, "-m", "fairgate.gateway.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, env=full, timeout=120)


@pytest.mark.parametrize(("text", "message"), [
    ("admin_tokn: x\n", "admin_tokn: unknown key (not a setting nor one of settings, backends, pools, "
                        "tenants, routes, prices)"),
    ("settings: {admin_tokn: x}\n", "settings.admin_tokn: unknown setting"),
    ("pools: [{name: p, replicas: [{name: a, base_ur: 'http://x'}]}]\n", "pools[0].replicas[0].base_ur: unknown key"),
    ("tenants: [{name: a, quota: {requests_per_minit: 1}}]\n", "tenants[0].quota.requests_per_minit: unknown key"),
    ("backends: [{name: b, base_url: 'http://x', api_key: '${ENV:FG_TEST_UNSET_VAR}'}]\n",
     "backends[0].api_key: environment variable FG_TEST_UNSET_VAR is not set"),
    ("tenants: [{name: a}, {name: a}]\n", "tenants[1].name: 'a' is listed twice"),
    ("tenants: [{name: a, sensitivity: {keywrds: [x]}}]\n", "tenants[0].sensitivity.keywrds: unknown key"),
])
def test_refused_with_the_path_of_the_key(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse(yaml.safe_load(text))
    assert str(exc.value) == message


def test_settings_file_typo_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "settings.yaml"
    f.write_text("admin_tokn: oops\n")
    with pytest.raises(ValueError, match="unknown setting 'admin_tokn'"):
        load_settings(str(f))


def test_apply_is_idempotent_and_export_round_trips(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/d.db"
    f = tmp_path / "fleet.yaml"
    f.write_text(CONFIG)
    env = {**ENV, "FAIRGATE_DATABASE_URL": db}
    first = fairgate("apply", "-f", str(f), env=env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == ["created backend ext", "created pool llama", "created tenant acme",
                                         "created tenant globex", "replaced routes (1 rules)"]
    again = fairgate("apply", "-f", str(f), env=env)
    assert (again.returncode, again.stdout) == (0, "no changes\n")
    exported = fairgate("export", env=env)
    assert exported.returncode == 0, exported.stderr
    assert "sk-ext-secret" not in exported.stdout  # secrets only as references
    data = yaml.safe_load(exported.stdout)
    assert data["backends"][0]["api_key"] == "${ENV:FAIRGATE_SECRET_EXT}"
    assert [r["name"] for r in data["pools"][0]["replicas"]] == ["gpu0", "gpu1"]
    assert data["pools"][0]["input_cost_per_mtok"] == 0.1 and data["pools"][0]["hourly_cost_usd"] == 4.0
    assert data["backends"][0]["hourly_cost_usd"] is None  # list prices only
    acme = next(t for t in data["tenants"] if t["name"] == "acme")
    assert acme["weight"] == 2.0 and acme["quota"]["requests_per_minute"] == 60
    assert acme["sensitivity"] == {"patterns": ["PRJ-[0-9]{4}"], "keywords": ["Project Zeta"], "strict_names": None,
                                   "legal_person_data": True, "institutional_contacts": None}
    assert "sensitivity" not in next(t for t in data["tenants"] if t["name"] == "globex")
    out = tmp_path / "export.yaml"
    out.write_text(exported.stdout)
    back = fairgate("apply", "-f", str(out), env={**env, "FAIRGATE_SECRET_EXT": "sk-ext-secret"})
    assert (back.returncode, back.stdout) == (0, "no changes\n"), back.stderr
    changed = fairgate("apply", "-f", str(out), env={**env, "FAIRGATE_SECRET_EXT": "sk-rotated"})
    assert changed.stdout == "updated backend ext\n"
    bad = tmp_path / "bad.yaml"
    bad.write_text("pools: [{name: p, polcy: affinity}]\n")
    refused = fairgate("apply", "-f", str(bad), env=env)
    assert refused.returncode == 1 and refused.stderr.strip() == "fairgate apply: pools[0].polcy: unknown key"


def test_serve_applies_the_file_at_start(tmp_path: Path) -> None:
    port = free_port()
    f = tmp_path / "serve.yaml"
    f.write_text(CONFIG + f"\ndatabase_url: sqlite:///{tmp_path}/s.db\nembedded_engine: false\n"
                          f"host: 127.0.0.1\nport: {port}\n")
    env = {**os.environ, **ENV, "PYTHONPATH": str(ROOT)}
    for var in ("FAIRGATE_DATABASE_URL", "FAIRGATE_PORT", "FAIRGATE_HOST", "FAIRGATE_ADMIN_TOKEN"):
        env.pop(var, None)
    proc = subprocess.Popen([sys.executable, "-m", "fairgate.gateway.cli", "serve", "--config", str(f)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                httpx.get(url + "/health/liveness", timeout=1)
                break
            except httpx.TransportError:
                assert time.time() < deadline
                time.sleep(0.1)
        h = {"authorization": f"Bearer {ADMIN_TOKEN}"}
        pools = httpx.get(url + "/admin/pools", headers=h).json()["data"]
        assert [(p["name"], [r["name"] for r in p["replicas"]]) for p in pools] == [("llama", ["gpu0", "gpu1"])]
        assert [b["name"] for b in httpx.get(url + "/admin/backends", headers=h).json()["data"]] == ["ext"]
        acme = next(t for t in httpx.get(url + "/admin/tenants", headers=h).json()["data"] if t["name"] == "acme")
        sens = httpx.get(url + f"/admin/tenants/{acme['id']}/sensitivity", headers=h).json()
        assert (sens["patterns"], sens["keywords"], sens["legal_person_data"]) == (["PRJ-[0-9]{4}"], ["Project Zeta"],
                                                                                   True)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stderr:
            proc.stderr.close()


def test_every_problem_of_a_file_is_reported_at_once() -> None:
    text = ("admin_tokn: x\nsettings: {redis_ur: y}\n"
            "backends: [{name: b, base_ur: 'http://x'}]\ntenants: [{name: a, quota: {requests_per_minit: 1}}]\n")
    with pytest.raises(ConfigError) as exc:
        parse(yaml.safe_load(text))
    assert str(exc.value).splitlines() == [
        "4 problems:",
        "  admin_tokn: unknown key (not a setting nor one of settings, backends, pools, tenants, routes, prices)",
        "  settings.redis_ur: unknown setting",
        "  backends[0].base_ur: unknown key",
        "  tenants[0].quota.requests_per_minit: unknown key"]


def test_a_tenant_pattern_re2_cannot_compile_is_refused_with_its_path() -> None:
    with pytest.raises(ConfigError) as exc:
        parse(yaml.safe_load("tenants: [{name: a, sensitivity: {patterns: ['PRJ-(']}}]\n"))
    assert str(exc.value).startswith("tenants[0].sensitivity.patterns: ")


def test_applied_patterns_and_options_reach_the_audit_as_counts_only(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/d.db"
    f = tmp_path / "fleet.yaml"
    f.write_text(CONFIG)
    assert fairgate("apply", "-f", str(f), env={**ENV, "FAIRGATE_DATABASE_URL": db}).returncode == 0
    from sqlalchemy import create_engine, text

    with create_engine(db).connect() as c:
        details = [str(d) for (d,) in c.execute(text("SELECT detail FROM audit_log WHERE action = 'apply.tenant'"))]
    assert details and not any("PRJ-" in d or "Project Zeta" in d for d in details)
    assert any('"patterns": 1' in d for d in details)
