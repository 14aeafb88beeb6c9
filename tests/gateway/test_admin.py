"""Admin API: token-only access, isolation between tenants, revocation, audit, reports."""

from __future__ import annotations

import csv
import io
import time

import httpx
import openai
import pytest

from tests.gateway.harness import ADMIN_TOKEN


def chat(gw, key: str, **extra) -> httpx.Response:
    return httpx.post(gw.url + "/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                      json={"model": "up", "messages": [{"role": "user", "content": "one two"}], "max_tokens": 2,
                            **extra}, timeout=30)


def test_tenant_key_cannot_call_admin_routes(make_gateway):
    gw, admin = make_gateway()
    t = admin.tenant()
    key = admin.key(t["id"])["key"]
    h = {"authorization": f"Bearer {key}"}
    for method, path in [("GET", "/admin/tenants"), ("POST", "/admin/tenants"),
                         ("POST", f"/admin/tenants/{t['id']}/keys"), ("GET", "/admin/usage"),
                         ("PUT", f"/admin/tenants/{t['id']}/quota")]:
        r = httpx.request(method, gw.url + path, headers=h, json={"name": "evil"})
        assert r.status_code == 401, (method, path)
        assert r.json()["error"]["code"] == "invalid_admin_token"
    assert len(admin.client.get("/admin/tenants").json()["data"]) == 1
    assert len(admin.client.get(f"/admin/tenants/{t['id']}/keys").json()["data"]) == 1


def test_admin_needs_a_token(make_gateway):
    gw, admin = make_gateway()
    r = httpx.get(gw.url + "/admin/tenants")
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"


def test_key_shown_once_and_stored_hashed(make_gateway):
    from sqlalchemy import select

    from fairgate.gateway.store.tables import ApiKey

    gw, admin = make_gateway()
    t = admin.tenant()
    created = admin.key(t["id"], name="ci")
    assert created["key"].startswith(created["prefix"]) and len(created["key"]) == 43
    listed = admin.client.get(f"/admin/tenants/{t['id']}/keys").json()["data"]
    assert "key" not in listed[0] and listed[0]["prefix"] == created["prefix"]
    with gw.state.sessions() as s:
        row = s.scalars(select(ApiKey)).one()
    assert created["key"] not in (row.key_hash, row.prefix) and len(row.key_hash) == 64


def test_revoked_key_is_refused_at_once(make_gateway):
    gw, admin = make_gateway()
    t = admin.tenant()
    k = admin.key(t["id"])
    assert chat(gw, k["key"]).status_code == 200  # now cached
    assert admin.client.delete(f"/admin/keys/{k['prefix']}").json()["revoked"] is True
    r = chat(gw, k["key"])
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"


def test_disabled_tenant_is_refused(make_gateway):
    gw, admin = make_gateway()
    t = admin.tenant()
    k = admin.key(t["id"])
    assert chat(gw, k["key"]).status_code == 200
    assert admin.client.delete(f"/admin/tenants/{t['id']}").json()["disabled"] is True
    assert chat(gw, k["key"]).status_code == 401


@pytest.mark.parametrize("db", ["sqlite", "postgres"])
def test_tenant_reads_only_its_own_usage(make_gateway, db):
    gw, admin = make_gateway(db=db)
    a, b = admin.tenant(name="alpha"), admin.tenant(name="beta")
    ka, kb = admin.key(a["id"])["key"], admin.key(b["id"])["key"]
    for _ in range(2):
        assert chat(gw, ka).status_code == 200
    assert chat(gw, kb).status_code == 200
    deadline = time.time() + 10
    while time.time() < deadline and gw.state.usage.written < 3:
        time.sleep(0.05)
    c = openai.OpenAI(base_url=gw.url + "/v1", api_key=kb)
    mine = httpx.get(gw.url + "/v1/usage?group_by=model", headers={"authorization": f"Bearer {kb}"}).json()
    assert [(r["tenant_id"], r["requests"]) for r in mine["data"]] == [(b["id"], 1)]
    r = httpx.get(gw.url + f"/v1/usage?tenant={a['id']}", headers={"authorization": f"Bearer {kb}"})
    assert r.status_code == 403
    assert c.models.list().data  # the same key still works for its own routes
    full = admin.client.get("/admin/usage?group_by=day").json()["data"]
    assert sorted((r["tenant_id"], r["requests"], r["total_tokens"]) for r in full) == sorted(
        [(a["id"], 2, 8), (b["id"], 1, 4)])
    text = admin.client.get(f"/admin/usage?tenant={a['id']}&group_by=hour&format=csv").text
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 1 and rows[0]["requests"] == "2" and rows[0]["group"].endswith(":00:00")
    empty = admin.client.get("/admin/usage?from=2000-01-01&to=2000-01-02").json()["data"]
    assert empty == []


def test_backend_api_key_never_returned_and_used_upstream(make_gateway, upstream):
    gw, admin = make_gateway()
    created = admin.backend("keyed", upstream.base_url, api_key="sk-upstream-secret")
    assert "api_key" not in created and created["has_api_key"] is True
    listed = admin.client.get("/admin/backends").text
    assert "sk-upstream-secret" not in listed
    audit = admin.client.get("/admin/audit").text
    assert "sk-upstream-secret" not in audit
    t = admin.tenant()
    k = admin.key(t["id"])["key"]
    r = httpx.post(gw.url + "/v1/chat/completions", headers={"authorization": f"Bearer {k}"},
                   json={"model": "keyed", "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 200
    assert upstream.app.headers[-1]["authorization"] == "Bearer sk-upstream-secret"


def test_every_admin_change_is_audited(make_gateway):
    gw, admin = make_gateway()
    t = admin.tenant(name="audited")
    k = admin.key(t["id"])
    admin.quota(t["id"], requests_per_minute=5)
    admin.client.patch(f"/admin/tenants/{t['id']}", json={"weight": 3.0})
    admin.client.delete(f"/admin/keys/{k['prefix']}")
    actions = [a["action"] for a in admin.client.get("/admin/audit").json()["data"]]
    assert actions[:6] == ["key.revoke", "tenant.update", "quota.set", "key.create", "tenant.create",
                           "backend.create"]


def test_admin_validation_errors(make_gateway):
    gw, admin = make_gateway()
    r = admin.client.post("/admin/tenants", json={"name": "x", "weight": "heavy"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "weight"
    r = admin.client.post("/admin/tenants", json={"name": "x", "priority_ceiling": "vip"})
    assert r.status_code == 400
    r = admin.client.post("/admin/tenants", json={"name": "x", "surprise": 1})
    assert r.status_code == 400
    admin.tenant(name="dup")
    assert admin.client.post("/admin/tenants", json={"name": "dup"}).status_code == 409
    assert admin.client.put("/admin/tenants/nope/quota", json={}).status_code == 404
    assert admin.client.get("/admin/usage?group_by=week").status_code == 400


@pytest.mark.parametrize("bad", ["", "Bearer", "Basic abc", f"Bearer {ADMIN_TOKEN}x"])
def test_bad_admin_tokens(make_gateway, bad):
    gw, admin = make_gateway()
    assert httpx.get(gw.url + "/admin/tenants", headers={"authorization": bad}).status_code == 401


def test_key_quota_applies_to_that_key_only(make_gateway):
    gw, admin = make_gateway(redis=True)
    t = admin.tenant()
    k1, k2 = admin.key(t["id"]), admin.key(t["id"])
    r = admin.client.put(f"/admin/keys/{k1['prefix']}/quota", json={"requests_per_minute": 1})
    assert r.status_code == 200 and r.json()["key_prefix"] == k1["prefix"]
    assert chat(gw, k1["key"]).status_code == 200
    limited = chat(gw, k1["key"])
    assert limited.status_code == 429 and limited.json()["error"]["code"] == "requests_per_minute"
    assert "key" in limited.json()["error"]["message"]
    assert chat(gw, k2["key"]).status_code == 200  # the tenant's other key is not limited
