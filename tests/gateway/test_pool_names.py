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

