"""Admin input that used to end in a plain-text 500 (issue 18), on real PostgreSQL: each is now
a 400 (or the right answer) in OpenAI's error format; with Redis gone an admin change that was
committed is answered as such, and /v1/models fails closed with a 503, not a 500."""

from __future__ import annotations

import contextlib

import httpx
import pytest

from fairgate.gateway.settings import Settings
from tests.gateway.harness import ADMIN_TOKEN, Admin, GatewayThread, pg_database, redis_prefix
from tests.helpers.tcp_proxy import TcpProxy

PATHS = [("GET", "/admin/tenants/{}"), ("PATCH", "/admin/tenants/{}"), ("DELETE", "/admin/tenants/{}"),
         ("POST", "/admin/tenants/{}/keys"), ("GET", "/admin/tenants/{}/keys"), ("DELETE", "/admin/keys/{}"),
         ("PUT", "/admin/tenants/{}/quota"), ("GET", "/admin/tenants/{}/quota"), ("PUT", "/admin/keys/{}/quota"),
         ("DELETE", "/admin/backends/{}"), ("GET", "/admin/tenants/{}/sensitivity")]


def openai_error(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    err = r.json()["error"]
    assert set(err) == {"message", "type", "code", "param"}
    return err


@pytest.fixture
def pg_admin(make_gateway):
    return make_gateway(db="postgres")


def test_nul_in_a_tenant_name_is_a_400(pg_admin):
    _, admin = pg_admin
    err = openai_error(admin.client.post("/admin/tenants", json={"name": "a\u0000b"}), 400)
    assert err["param"] == "name" and "NUL" in err["message"]
    t = admin.tenant()
    assert openai_error(admin.client.patch(f"/admin/tenants/{t['id']}", json={"name": "\u0000"}), 400)["param"] == "name"
    assert openai_error(admin.client.post(f"/admin/tenants/{t['id']}/keys", json={"name": "k\u0000"}), 400)


@pytest.mark.parametrize(("method", "path"), PATHS)
def test_nul_in_a_path_id_is_a_400(pg_admin, method, path):
    _, admin = pg_admin
    body = {} if method in ("PUT", "PATCH", "POST") else None
    r = admin.client.request(method, path.format("ab%00cd"), json=body)
    err = openai_error(r, 400)
    assert err["code"] == "invalid_value" and "NUL" in err["message"]


def test_overlong_values_and_bad_query_numbers_are_400s(pg_admin):
    _, admin = pg_admin
    url = "http://127.0.0.1:9/" + "a" * 500
    err = openai_error(admin.client.post("/admin/backends", json={"name": "long", "base_url": url}), 400)
    assert err["param"] == "base_url"
    assert openai_error(admin.client.get("/admin/audit?limit=abc"), 400)["param"] == "limit"
    assert admin.client.get("/admin/audit?limit=2").status_code == 200
    assert openai_error(admin.client.get("/admin/tenants/" + "x" * 300), 400)["param"] == "id"


def test_with_redis_gone_a_committed_change_is_a_201_and_models_is_a_503(upstream):
    with contextlib.ExitStack() as es:
        proxy = es.enter_context(TcpProxy("127.0.0.1", 6379))
        settings = Settings(admin_token=ADMIN_TOKEN, database_url=es.enter_context(pg_database()),
                            embedded_engine=False, redis_url=f"redis://127.0.0.1:{proxy.port}/0",
                            redis_prefix=es.enter_context(redis_prefix()))
        gw = es.enter_context(GatewayThread(settings))
        admin = Admin(gw.url)
        es.callback(admin.close)
        admin.backend("up", upstream.base_url, model="up-model")
        key = admin.key(admin.tenant()["id"])["key"]
        h = {"authorization": f"Bearer {key}"}
        assert httpx.get(gw.url + "/v1/models", headers=h).status_code == 200
        proxy.cut()
        r = admin.client.post("/admin/tenants", json={"name": "made-while-redis-was-down"})
        assert r.status_code == 201, r.text
        names = [t["name"] for t in admin.client.get("/admin/tenants").json()["data"]]
        assert "made-while-redis-was-down" in names
        assert openai_error(admin.client.post("/admin/tenants", json={"name": "made-while-redis-was-down"}),
                            409)["code"] == "conflict"
        err = openai_error(httpx.get(gw.url + "/v1/models", headers=h), 503)
        assert err["code"] == "quota_unavailable"
        proxy.restore()
        deadline = 50
        while httpx.get(gw.url + "/v1/models", headers=h).status_code != 200 and deadline:
            deadline -= 1
            import time

            time.sleep(0.1)
        assert deadline, "the gateway did not come back after Redis"


def test_with_the_database_gone_admin_calls_are_a_503(upstream, tmp_path):
    with contextlib.ExitStack() as es:
        db = es.enter_context(pg_database())
        proxy = es.enter_context(TcpProxy("127.0.0.1", 5432))
        settings = Settings(admin_token=ADMIN_TOKEN, database_url=db.replace(":5432/", f":{proxy.port}/"),
                            embedded_engine=False, usage_journal_path=str(tmp_path / "j"))
        gw = es.enter_context(GatewayThread(settings))
        admin = Admin(gw.url)
        es.callback(admin.close)
        assert admin.client.get("/admin/tenants").status_code == 200
        proxy.cut()
        err = openai_error(admin.client.get("/admin/tenants"), 503)
        assert err["code"] == "database_unavailable"
        proxy.restore()
        assert admin.client.get("/admin/tenants").status_code == 200
