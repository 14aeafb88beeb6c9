"""deploy/observability: the Grafana dashboard and the Prometheus alert rules.

Both are read as an operator's Grafana and Prometheus would read them: every panel and rule has a
readable title and description, the rules file has the structure Prometheus loads (and passes
`promtool check rules` where promtool is installed), and every metric and label a PromQL
expression names is one that a real gateway (embedded engine) and a real engine server export
once they have served a few requests; a renamed metric fails here, not on a blank dashboard."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from fairgate.gateway.settings import Settings
from tests.gateway.harness import ADMIN_TOKEN, Admin, GatewayThread
from tests.helpers.engine_proc import engine_server

ASSETS = Path(__file__).resolve().parents[1] / "deploy" / "observability"
DASHBOARD = ASSETS / "grafana-dashboard.json"
RULES = ASSETS / "alerts.yaml"
METRIC = re.compile(r"\b(fairgate_[a-z0-9_]+)\b")
SELECTOR = re.compile(r"\b(fairgate_[a-z0-9_]+)\{([^}]*)\}")
MATCHER_LABEL = re.compile(r"([a-z_]+)\s*(?:=~|!~|!=|=)")
GROUPING = re.compile(r"\bby \(([^)]*)\)\s*\((?:\w+\()?(fairgate_[a-z0-9_]+)")  # sum by (a, b) (rate(m...
SCRAPE_LABELS = {"instance", "job"}  # added by Prometheus to every series it scrapes
DURATION = re.compile(r"^\d+[smhd]$")


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def expressions() -> dict[str, str]:
    """Where → PromQL, for every panel target, template query and alert rule."""
    out = {f"panel {p['title']!r} {t['refId']}": t["expr"] for p in dashboard()["panels"] for t in p.get("targets", [])}
    for v in dashboard()["templating"]["list"]:
        if v["type"] == "query":
            out[f"variable {v['name']}"] = v["definition"]
    out |= {f"alert {r['alert']}": r["expr"] for r in rules()}
    return out


def test_every_panel_says_what_it_shows():
    panels = [p for p in dashboard()["panels"] if p["type"] != "row"]
    ids = [p["id"] for p in dashboard()["panels"]]
    assert len(ids) == len(set(ids)) and len(panels) >= 18
    for p in panels:
        assert len(p["title"]) > 10 and len(p["description"]) > 30, p["title"]
        assert p["datasource"]["uid"] == "${datasource}" and p["targets"], p["title"]
        assert all(t["expr"].strip() and t["legendFormat"] for t in p["targets"]), p["title"]
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
    titles = " | ".join(p["title"] for p in panels).lower()
    for asked in ("requests per second", "refusals", "time to first token", "inter-token", "end-to-end",
                  "tokens per second", "prefix-cache hit rate", "by tenant", "cost", "kv-cache",
                  "running and waiting", "preemptions", "circuit breakers", "usage rows"):
        assert asked in titles, asked
    assert "histogram_quantile(0.99" in json.dumps(dashboard()) and "histogram_quantile(0.5" in json.dumps(dashboard())


def test_alert_rules_have_the_structure_prometheus_loads():
    doc = yaml.safe_load(RULES.read_text())
    assert set(doc) == {"groups"}
    names = [g["name"] for g in doc["groups"]]
    assert len(names) == len(set(names))
    alerts = []
    for group in doc["groups"]:
        assert set(group) == {"name", "rules"} and group["rules"]
        for rule in group["rules"]:
            assert set(rule) == {"alert", "expr", "for", "labels", "annotations"}, rule.get("alert")
            assert re.fullmatch(r"Fairgate[A-Za-z0-9]+", rule["alert"]) and DURATION.match(rule["for"])
            assert rule["labels"]["severity"] in {"warning", "critical"}
            assert set(rule["annotations"]) == {"summary", "description"}
            assert len(rule["annotations"]["description"]) > 80, rule["alert"]
            assert rule["expr"].count("(") == rule["expr"].count(")"), rule["alert"]
            alerts.append(rule["alert"])
    assert len(alerts) == len(set(alerts))
    for asked in ("Refusal", "TimeToFirstToken", "UsageBacklog", "BreakerOpen", "KVCacheNearlyFull",
                  "QueueGrowing"):
        assert any(asked in a for a in alerts), asked


@pytest.mark.skipif(shutil.which("promtool") is None,
                    reason="promtool is not installed (Debian's `prometheus` package, ~96 MB): structure checked above")
def test_promtool_checks_the_rules():
    out = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def used() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Metric → where it is used; metric → label names its selectors match on or group by."""
    where: dict[str, set[str]] = {}
    labels: dict[str, set[str]] = {}
    for place, expr in expressions().items():
        names = METRIC.findall(expr)
        assert names, f"{place} uses no fairgate metric: {expr}"
        for name in names:
            where.setdefault(name, set()).add(place)
        for name, body in SELECTOR.findall(expr):
            labels.setdefault(name, set()).update(MATCHER_LABEL.findall(body))
        for by, name in GROUPING.findall(expr):
            labels.setdefault(name, set()).update({b.strip() for b in by.split(",")} - SCRAPE_LABELS)
    return where, labels


def exported(texts: list[str]) -> dict[str, set[str]]:
    """Sample name (with its _total/_bucket/_sum/_count suffix) → label names seen on it."""
    out: dict[str, set[str]] = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                out.setdefault(s.name, set()).update(s.labels)
    return out


def _drive(gw: str, key: str, model: str) -> None:
    """Answered requests to the embedded engine and to the engine server (chat streamed and not,
    embeddings), and two refusals (a bad key, an invalid body)."""
    h = {"authorization": f"Bearer {key}"}
    chat = {"max_tokens": 4, "temperature": 0, "messages": [{"role": "user", "content": "What is a quota?"}]}
    for target in (model, "engine-srv"):
        for stream in (False, True):
            r = httpx.post(gw + "/v1/chat/completions", headers=h, timeout=120, json={**chat, "model": target,
                                                                                      "stream": stream})
            assert r.status_code == 200, r.text
    r = httpx.post(gw + "/v1/embeddings", headers=h, timeout=120, json={"model": "engine-srv", "input": "hours"})
    assert r.status_code == 200, r.text
    assert httpx.post(gw + "/v1/chat/completions", headers={"authorization": "Bearer nope"},
                      json={**chat, "model": model}).status_code == 401
    assert httpx.post(gw + "/v1/chat/completions", headers=h,
                      json={**chat, "model": model, "max_tokens": -1}).status_code == 400


def test_every_metric_the_assets_use_is_exported(tmp_path, tiny_model_dir):
    where, labels = used()
    settings = Settings(admin_token=ADMIN_TOKEN, database_url=f"sqlite:///{tmp_path}/o.db",
                        model=str(tiny_model_dir), metrics_tenant_labels=True)
    with engine_server(tiny_model_dir) as engine, GatewayThread(settings) as gw:
        admin = Admin(gw.url)
        admin.backend("engine-srv", engine + "/v1", kind="local", model="tiny", hourly_cost_usd=2.0)
        key = admin.key(admin.tenant()["id"])["key"]
        _drive(gw.url, key, tiny_model_dir.name)
        auth = {"authorization": f"Bearer {ADMIN_TOKEN}"}
        deadline = time.monotonic() + 60  # usage rows land after the responses; cost refreshes every 15 s
        while True:
            texts = [httpx.get(gw.url + "/metrics", headers=auth).text, httpx.get(engine + "/metrics").text]
            seen = exported(texts)
            missing = {name: sorted(places) for name, places in where.items() if name not in seen}
            if not missing or time.monotonic() > deadline:
                break
            time.sleep(1)
        admin.close()
    assert not missing, f"used but not exported: {json.dumps(missing, indent=1)}"
    for name, wanted in labels.items():
        assert wanted <= seen[name], f"{name} has no label {wanted - seen[name]} ({sorted(where[name])})"
    assert len(where) >= 25  # the check covers the assets, not a corner of them
