"""Tenant isolation of the prefix cache through the gateway and its embedded engine: two tenants
sending the same prompt never hit each other's cache, until an admin puts both into one
`prefix_cache_group`; clearing the group isolates them again."""

from __future__ import annotations

import httpx

from tests.gateway.harness import GatewayThread, embedded_gateway

SYSTEM = "Every tenant has a quota, a priority class and a budget for tokens per day and per month. " * 2


def cached(gw: GatewayThread, key: str, model: str, question: str, system: str = SYSTEM) -> int:
    r = httpx.post(gw.url + "/v1/chat/completions", headers={"authorization": f"Bearer {key}"}, timeout=120,
                   json={"model": model, "max_tokens": 2, "temperature": 0, "messages": [
                       {"role": "system", "content": system}, {"role": "user", "content": question}]})
    assert r.status_code == 200, r.text
    usage = r.json()["usage"]
    assert usage["prompt_tokens"] > 64
    return usage["prompt_tokens_details"]["cached_tokens"]


def test_cache_shared_only_inside_an_admin_made_group(tmp_path, tiny_model_dir):
    with embedded_gateway(tmp_path, tiny_model_dir) as (gw, admin):
        model = tiny_model_dir.name
        a, b = admin.tenant(), admin.tenant()
        assert a["prefix_cache_group"] is None
        ka, kb = admin.key(a["id"])["key"], admin.key(b["id"])["key"]

        assert cached(gw, ka, model, "Hello?") == 0
        assert cached(gw, kb, model, "Hello?") == 0  # same prompt, other tenant: no hit
        assert cached(gw, ka, model, "Hello?") > 64  # but the tenant's own cache works

        for t in (a, b):
            r = admin.client.patch(f"/admin/tenants/{t['id']}", json={"prefix_cache_group": "docs-team"})
            assert r.status_code == 200 and r.json()["prefix_cache_group"] == "docs-team"
        assert cached(gw, ka, model, "Günaydın") == 0  # the group's cache starts empty
        assert cached(gw, kb, model, "Günaydın") > 64  # b hits what a just computed

        r = admin.client.patch(f"/admin/tenants/{b['id']}", json={"prefix_cache_group": None})
        assert r.status_code == 200 and r.json()["prefix_cache_group"] is None
        other = SYSTEM.upper()
        assert cached(gw, ka, model, "Nasılsınız?", other) == 0
        assert cached(gw, kb, model, "Nasılsınız?", other) == 0  # a is still in the group, b is not

        bad = admin.client.patch(f"/admin/tenants/{a['id']}", json={"prefix_cache_group": "no spaces"})
        assert bad.status_code == 400
        created = admin.tenant(prefix_cache_group="docs-team")
        assert created["prefix_cache_group"] == "docs-team"
        audit = admin.client.get("/admin/audit").json()["data"]
        assert any(e["detail"] == {"prefix_cache_group": None} for e in audit)
