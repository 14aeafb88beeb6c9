"""Upstream API keys at rest: the database holds Fernet tokens only, calls upstream still carry
the right key, migration 0008 encrypts what older versions stored in plaintext, and a gateway
without the secrets key fails clearly instead of at the first upstream call."""

from __future__ import annotations

import asyncio
import os

import httpx
import psycopg
import pytest
from cryptography.fernet import Fernet
from sqlalchemy import text

from fairgate.gateway.settings import Settings
from fairgate.gateway.store.db import make_engine, upgrade
from fairgate.gateway.store.secret_box import SecretBox, SecretsKeyMissing, check_readable
from tests.gateway.harness import ADMIN_TOKEN, Admin, GatewayThread

SECRET = "sk-upstream-secret-7f3a9"
CHAT = {"model": "keyed", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


def _raw_keys(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT api_key FROM backends WHERE api_key IS NOT NULL "
                            "UNION ALL SELECT api_key FROM backend_pools WHERE api_key IS NOT NULL "
                            "UNION ALL SELECT api_key FROM pool_replicas WHERE api_key IS NOT NULL").fetchall()
    return [r[0] for r in rows]


def test_postgres_holds_only_ciphertext_and_upstream_gets_the_key(make_gateway, upstream):
    gw, admin = make_gateway(db="postgres")
    admin.backend("keyed", upstream.base_url, model="up-model", api_key=SECRET)
    r = admin.client.post("/admin/pools", json={"name": "gpus", "api_key": SECRET + "-pool", "replicas": [
        {"name": "g0", "base_url": "http://127.0.0.1:9/v1", "api_key": SECRET + "-replica"}]})
    assert r.status_code == 201, r.text
    stored = _raw_keys(gw.state.settings.database_url)
    assert len(stored) == 3 and all(v.startswith("fernet:") for v in stored)
    assert not any(SECRET in v for v in stored)
    box = SecretBox([os.environ["FAIRGATE_SECRETS_KEY"]])
    assert sorted(box.decrypt(v) for v in stored) == sorted([SECRET, SECRET + "-pool", SECRET + "-replica"])
    t = admin.tenant()
    key = admin.key(t["id"])["key"]
    seen = len(upstream.app.headers)
    r = httpx.post(gw.url + "/v1/chat/completions", json=CHAT, headers={"authorization": f"Bearer {key}"})
    assert r.status_code == 200, r.text
    assert upstream.app.headers[seen]["authorization"] == f"Bearer {SECRET}"
    listed = admin.client.get("/admin/backends").text
    assert SECRET not in listed and "fernet:" not in listed


def test_migration_encrypts_plaintext_keys(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path}/old.db"
    upgrade(url, "0006_backend_pools")
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO backends (id, name, kind, base_url, api_key, input_cost_per_mtok, "
                          "output_cost_per_mtok, enabled, created_at) VALUES ('b1', 'old', 'openai', "
                          "'http://x/v1', :k, 0, 0, 1, '2026-01-01')"), {"k": SECRET})
    engine.dispose()
    saved = os.environ["FAIRGATE_SECRETS_KEY"]
    monkeypatch.delenv("FAIRGATE_SECRETS_KEY")
    with pytest.raises(RuntimeError, match="FAIRGATE_SECRETS_KEY"):
        upgrade(url, secrets=None)
    monkeypatch.setenv("FAIRGATE_SECRETS_KEY", saved)
    box = SecretBox([Fernet.generate_key().decode()])
    upgrade(url, secrets=box)
    engine = make_engine(url, box)
    with engine.connect() as conn:
        raw = conn.execute(text("SELECT api_key FROM backends")).scalar_one()
    assert raw.startswith("fernet:") and SECRET not in raw and box.decrypt(raw) == SECRET
    check_readable(engine, box)
    with pytest.raises(SecretsKeyMissing):
        check_readable(engine, None)
    with pytest.raises(SecretsKeyMissing, match="wrong key"):
        SecretBox([Fernet.generate_key().decode()]).decrypt(raw)
    engine.dispose()


def test_gateway_without_a_key(tmp_path, upstream):
    url = f"sqlite:///{tmp_path}/nokey.db"
    settings = Settings(admin_token=ADMIN_TOKEN, database_url=url, embedded_engine=False, secrets_key=None)
    with GatewayThread(settings) as gw:
        admin = Admin(gw.url)
        r = admin.client.post("/admin/backends", json={"name": "k", "base_url": upstream.base_url, "api_key": SECRET})
        assert r.status_code == 400 and r.json()["error"]["param"] == "api_key", r.text
        assert "FAIRGATE_SECRETS_KEY" in r.json()["error"]["message"]
        admin.backend("plain", upstream.base_url)  # no secret: fine without a key
        admin.close()
    # a database that holds a secret: the keyless gateway refuses to start, saying why
    keyed = Settings(admin_token=ADMIN_TOKEN, database_url=url, embedded_engine=False,
                     secrets_key=Fernet.generate_key().decode())
    with GatewayThread(keyed) as gw:
        Admin(gw.url).backend("k", upstream.base_url, api_key=SECRET)
    from fairgate.gateway.app import _build_state

    with pytest.raises(SecretsKeyMissing, match="holds upstream API keys"):  # the lifespan's start
        asyncio.run(_build_state(settings, migrate=True))
    with pytest.raises(SecretsKeyMissing, match="holds upstream API keys"):
        check_readable(make_engine(url), None)


def test_key_file_and_rotation(tmp_path):
    from fairgate.gateway.store.secret_box import box_from_settings

    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    token = SecretBox([old]).encrypt(SECRET)
    f = tmp_path / "key"
    f.write_text(f"{new},{old}\n")
    box = box_from_settings(Settings(secrets_key=None, secrets_key_file=str(f)))
    assert box is not None and box.decrypt(token) == SECRET  # the old key still decrypts
    assert SecretBox([new]).decrypt(box.encrypt(SECRET)) == SECRET  # the first key encrypts
    with pytest.raises(ValueError, match="not a Fernet key"):
        SecretBox(["short"])
