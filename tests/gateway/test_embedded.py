"""The embedded default: an in-process engine on a model folder, listed under the folder name,
receiving tenant weights and serving tenants through the same request path."""

from __future__ import annotations

import httpx

from gateway.settings import Settings
from tests.gateway.harness import ADMIN_TOKEN, Admin, GatewayThread


def test_embedded_engine_serves_and_gets_weights(tmp_path, tiny_model_dir):
    settings = Settings(admin_token=ADMIN_TOKEN, database_url=f"sqlite:///{tmp_path}/e.db",
                        model=str(tiny_model_dir))
    with GatewayThread(settings) as gw:
        admin = Admin(gw.url)
        name = tiny_model_dir.name
        t = admin.tenant(weight=3.0)
        key = admin.key(t["id"])["key"]
        h = {"authorization": f"Bearer {key}"}
        models = httpx.get(gw.url + "/v1/models", headers=h).json()["data"]
        assert [m["id"] for m in models] == [name]
        engine = gw.state.embedded.engine
        assert engine.fairness_weights == {t["id"]: 3.0}
        admin.client.patch(f"/admin/tenants/{t['id']}", json={"weight": 0.5})
        assert engine.fairness_weights == {t["id"]: 0.5}
        r = httpx.post(gw.url + "/v1/chat/completions", headers=h, timeout=120, json={
            "model": name, "messages": [{"role": "user", "content": "merhaba"}], "max_tokens": 3,
            "temperature": 0})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["model"] == name and body["usage"]["completion_tokens"] <= 3
        # no max_tokens: the reserved default is kept inside the tiny model's context
        r = httpx.post(gw.url + "/v1/chat/completions", headers=h, timeout=120, json={
            "model": name, "messages": [{"role": "user", "content": "merhaba"}], "temperature": 0})
        assert r.status_code == 200, r.text
        admin.close()
