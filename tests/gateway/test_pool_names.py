"""Pools and backends share one name space: the admin API refuses a name the
other already holds with a 409 in the OpenAI error format, and nothing is written."""

from __future__ import annotations


def _pool(admin, name: str, base_url: str):
    return admin.client.post("/admin/pools", json={"name": name, "kind": "local", "model": "up-model",
                                                   "replicas": [{"name": "r1", "base_url": base_url}]})


def test_backend_named_like_a_pool_is_refused_and_vice_versa(make_gateway, upstream):
    _, admin = make_gateway()
    assert _pool(admin, "shared-name", upstream.base_url).status_code == 201
    r = admin.client.post("/admin/backends", json={"name": "shared-name", "base_url": upstream.base_url})
    assert r.status_code == 409
    err = r.json()["error"]
    assert err["code"] == "conflict" and "pool named 'shared-name'" in err["message"] and err["type"]
    names = [b["name"] for b in admin.client.get("/admin/backends").json()["data"]]
    assert "shared-name" not in names
    # the other way round: "up" is a backend, so no pool may take its name
    r = _pool(admin, "up", upstream.base_url)
    assert r.status_code == 409 and r.json()["error"]["code"] == "conflict"
    assert "up" not in [p["name"] for p in admin.client.get("/admin/pools").json()["data"]]



def test_apply_refuses_a_backend_named_like_a_pool(tmp_path):
    import subprocess
    import sys

    from tests.gateway.harness import ROOT

    db = f"sqlite:///{tmp_path}/d.db"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "FAIRGATE_DATABASE_URL": db}
    pool = tmp_path / "pool.yaml"
    pool.write_text("pools: [{name: llama, replicas: [{name: gpu0, base_url: 'http://127.0.0.1:9/v1'}]}]\n")
    backend = tmp_path / "backend.yaml"
    backend.write_text("backends: [{name: llama, base_url: 'http://127.0.0.1:9/v1'}]\n")
    run = [sys.executable, "-m", "fairgate.gateway.cli", "apply", "-f"]
    first = subprocess.run([*run, str(pool)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    second = subprocess.run([*run, str(backend)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert second.returncode != 0
    assert "backends: a pool named 'llama' exists" in second.stderr + second.stdout
