"""Routing rules through the real gateway: admin validation, rule-based routing, the
sensitive → local invariant at the recording upstreams, clear 503s, fallbacks and the audit."""

from __future__ import annotations

import contextlib
import json
import time

import httpx
import openai
import pytest

from fairgate.gateway.settings import Settings
from tests.gateway.harness import ADMIN_TOKEN, Admin, GatewayThread, free_port
from tests.helpers.upstream import UpstreamServer

TCKN = "10000000146"


@pytest.fixture(scope="module")
def ups():
    with UpstreamServer() as local, UpstreamServer() as ext:
        yield local, ext


@pytest.fixture
def gw(tmp_path, ups):
    local, ext = ups
    local.received.clear()
    ext.received.clear()
    local.behaviour.fail_next = []
    ext.behaviour.fail_next = []
    settings = Settings(admin_token=ADMIN_TOKEN, database_url=f"sqlite:///{tmp_path}/gw.db",
                        embedded_engine=False, upstream_max_retries=0)
    with contextlib.ExitStack() as es:
        g = es.enter_context(GatewayThread(settings))
        admin = Admin(g.url)
        es.callback(admin.close)
        admin.backend("local-llm", local.base_url, kind="local", model="up-model")
        admin.backend("ext-gpt", ext.base_url, kind="openai", model="up-model")
        admin.backend("dead-local", f"http://127.0.0.1:{free_port()}/v1", kind="local", model="x")
        yield g, admin, local, ext


def put_routes(admin: Admin, rules: object) -> httpx.Response:
    return admin.client.put("/admin/routes", json=rules)


def chat(g: GatewayThread, key: str, text: str, model: str = "chat", **headers: str) -> httpx.Response:
    return httpx.post(g.url + "/v1/chat/completions", timeout=30,
                      headers={"authorization": f"Bearer {key}", **headers},
                      json={"model": model, "max_tokens": 3, "messages": [{"role": "user", "content": text}]})


def chats(up: UpstreamServer) -> list[dict]:
    """Generation requests only (local backends also receive fairness-weight pushes)."""
    return [b for b in up.received if "messages" in b or "prompt" in b]


def seen(up: UpstreamServer) -> str:
    return json.dumps(chats(up), ensure_ascii=False)


STANDARD = [
    {"id": "pii-local", "match": {"model": "chat", "sensitivity": "sensitive"}, "backend": "local-llm"},
    {"id": "public-ext", "match": {"model": "chat", "sensitivity": "public"}, "backend": "ext-gpt",
     "fallbacks": ["local-llm"]},
]


def test_put_rejects_rules_that_could_leak_and_lists_every_problem(gw) -> None:
    g, admin, _, _ = gw
    r = put_routes(admin, [{"match": {"model": "chat"}, "backend": "ext-gpt"},
                           {"match": {}, "backend": "nowhere"}])
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == "invalid_routing_rules" and err["type"]
    assert "external backend 'ext-gpt'" in err["message"] and "unknown backend 'nowhere'" in err["message"]
    r = put_routes(admin, [{"match": {"sensitivty": "public"}, "backend": "ext-gpt"}])
    assert r.status_code == 400 and "unknown match keys" in r.json()["error"]["message"]
    r = admin.client.put("/admin/routes", content=b"{nope")
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"
    r = httpx.put(g.url + "/admin/routes", json=STANDARD)  # no admin token
    assert r.status_code == 401
    assert admin.client.get("/admin/routes").json()["rules"] == []  # nothing was saved


def test_rules_route_by_sensitivity_and_invariant_holds_at_upstreams(gw) -> None:
    g, admin, local, ext = gw
    r = put_routes(admin, STANDARD)
    assert r.status_code == 200, r.text
    assert [x["id"] for x in admin.client.get("/admin/routes").json()["rules"]] == ["pii-local", "public-ext"]
    key = admin.key(admin.tenant()["id"])["key"]
    assert chat(g, key, "Bugün hava nasıl?").status_code == 200
    assert chat(g, key, f"TC kimlik numaram {TCKN}, kaydı güncelle").status_code == 200
    assert chat(g, key, "hi", **{"x-data-classification": "sensitive"}).status_code == 200
    assert len(chats(ext)) == 1 and "Bugün" in seen(ext) and TCKN not in seen(ext)
    assert len(chats(local)) == 2 and TCKN in seen(local)
    bad = chat(g, key, "hi", **{"x-data-classification": "secret"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_classification_header"


def test_local_only_tenant_and_tenant_keywords_stay_local(gw) -> None:
    g, admin, local, ext = gw
    assert put_routes(admin, STANDARD).status_code == 200
    strict = admin.tenant(data_residency="local_only")
    assert chat(g, admin.key(strict["id"])["key"], "just a question").status_code == 200
    t = admin.tenant()
    r = admin.client.put(f"/admin/tenants/{t['id']}/sensitivity",
                         json={"patterns": [r"PRJ-\d{4}"], "keywords": ["Kırmızı Ejder"]})
    assert r.status_code == 200, r.text
    key = admin.key(t["id"])["key"]
    assert chat(g, key, "kırmızı ejder planını özetle").status_code == 200
    assert chat(g, key, "status of prj-1234?").status_code == 200
    assert chats(ext) == [] and len(chats(local)) == 3
    bad = admin.client.put(f"/admin/tenants/{t['id']}/sensitivity", json={"patterns": ["(x"]})
    assert bad.status_code == 400 and "invalid regular expression" in bad.json()["error"]["message"]


def test_sensitive_with_local_down_is_a_clear_503_and_public_falls_back(gw) -> None:
    g, admin, local, ext = gw
    rules = [
        {"id": "pii", "match": {"sensitivity": "sensitive"}, "backend": "dead-local"},
        {"id": "pub", "match": {"sensitivity": "public"}, "backend": "ext-gpt", "fallbacks": ["local-llm"]},
    ]
    assert put_routes(admin, rules).status_code == 200
    key = admin.key(admin.tenant()["id"])["key"]
    r = chat(g, key, f"kimlik {TCKN}", model="anything")
    assert r.status_code == 503
    err = r.json()["error"]
    assert err["code"] == "local_backend_unavailable" and "not sent to any external API" in err["message"]
    ext.behaviour.fail_next = [503]
    r = chat(g, key, "public question", model="anything")
    assert r.status_code == 200  # ext answered 503, the rule's fallback served it
    assert len(chats(ext)) == 1 and len(chats(local)) == 1 and TCKN not in seen(ext)


def test_sensitive_request_without_any_local_rule_is_refused_not_leaked(gw) -> None:
    g, admin, _, ext = gw
    assert put_routes(admin, [{"match": {"model": "gpt", "sensitivity": "public"}, "backend": "ext-gpt"}]).status_code == 200
    key = admin.key(admin.tenant()["id"])["key"]
    r = chat(g, key, "IBAN TR33 0006 1005 1978 6457 8413 26", model="gpt")
    assert r.status_code == 503 and r.json()["error"]["code"] == "no_local_backend"
    assert chat(g, key, "x", model="ext-gpt", **{"x-data-classification": "sensitive"}).status_code == 503
    assert chat(g, key, "x", model="missing").status_code == 404
    assert chats(ext) == []


def test_auto_model_sends_simple_requests_to_the_small_backend(gw) -> None:
    g, admin, local, ext = gw
    rules = [
        {"id": "auto-small", "match": {"model": "auto", "max_complexity": 0.3, "sensitivity": "public"},
         "backend": "ext-gpt"},
        {"id": "auto-big", "match": {"model": "auto"}, "backend": "local-llm"},
    ]
    assert put_routes(admin, rules).status_code == 200
    key = admin.key(admin.tenant()["id"])["key"]
    assert chat(g, key, "Merhaba!", model="auto").status_code == 200
    hard = "Analyze step by step and prove the complexity of this algorithm:\n```python\ndef f(x): pass\n```"
    assert chat(g, key, hard, model="auto").status_code == 200
    assert len(chats(ext)) == 1 and len(chats(local)) == 1 and "Analyze" in seen(local)


def test_audit_rows_carry_decision_and_kinds_never_prompt_text(gw) -> None:
    g, admin, _, _ = gw
    assert put_routes(admin, STANDARD).status_code == 200
    t = admin.tenant()
    key = admin.key(t["id"])["key"]
    secret = f"kartım 4111 1111 1111 1111 ve kimliğim {TCKN}"
    r1 = chat(g, key, secret)
    r2 = chat(g, key, "a public question")
    rows = admin.client.get("/admin/routing/audit", params={"tenant_id": t["id"]}).json()["data"]
    by_req = {row["request_id"]: row for row in rows}
    a = by_req[r1.headers["x-request-id"]]
    assert a["sensitive"] and a["finding_kinds"] == ["card", "tckn"] and a["rule_id"] == "pii-local"
    assert a["backends"] == ["local-llm"] and a["reasons"] == ["detector"] and a["status"] == 200
    b = by_req[r2.headers["x-request-id"]]
    assert not b["sensitive"] and b["rule_id"] == "public-ext" and b["backends"] == ["ext-gpt", "local-llm"]
    dump = json.dumps(rows)
    # the whole card number, not a 4-digit piece that a random hex id may contain
    for leaked in (TCKN, "4111 1111 1111 1111", "4111111111111111", "kartım", "public question"):
        assert leaked not in dump


def test_rules_take_effect_on_another_replica_without_restart(tmp_path, ups) -> None:
    """Two gateways sharing one database and Redis: a PUT on one changes routing on the other."""
    from tests.gateway.harness import REDIS_URL, redis_prefix

    local, ext = ups
    local.received.clear()
    ext.received.clear()
    with contextlib.ExitStack() as es:
        prefix = es.enter_context(redis_prefix())
        settings = Settings(admin_token=ADMIN_TOKEN, database_url=f"sqlite:///{tmp_path}/shared.db",
                            embedded_engine=False, redis_url=REDIS_URL, redis_prefix=prefix,
                            upstream_max_retries=0)
        a = es.enter_context(GatewayThread(settings))
        b = es.enter_context(GatewayThread(settings))
        admin_a, admin_b = Admin(a.url), Admin(b.url)
        es.callback(admin_a.close)
        es.callback(admin_b.close)
        admin_a.backend("local-llm", local.base_url, kind="local", model="up-model")
        admin_a.backend("ext-gpt", ext.base_url, kind="openai", model="up-model")
        key = admin_a.key(admin_a.tenant()["id"])["key"]
        assert put_routes(admin_a, [{"match": {"model": "chat"}, "backend": "local-llm"}]).status_code == 200
        assert _eventually(lambda: chat(b, key, "q1").status_code == 200)
        assert chats(local) and not chats(ext)
        rules = [{"match": {"model": "chat", "sensitivity": "public"}, "backend": "ext-gpt"}]
        assert put_routes(admin_a, rules).status_code == 200
        assert _eventually(lambda: chat(b, key, "q2").status_code == 200 and bool(chats(ext)))
        assert "q2" in seen(ext)


def _eventually(check, timeout_s: float = 10.0) -> bool:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return False


def test_personal_data_outside_message_text_and_images_stay_local(gw) -> None:
    g, admin, local, ext = gw
    assert put_routes(admin, STANDARD).status_code == 200
    key = admin.key(admin.tenant()["id"])["key"]
    headers = {"authorization": f"Bearer {key}"}
    tool_call = {"model": "chat", "max_tokens": 2, "messages": [
        {"role": "user", "content": "look this person up"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": f'{{"tckn": "{TCKN}"}}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "no record"}]}
    image = {"model": "chat", "max_tokens": 2, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is in this scan?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}]}
    for body in (tool_call, image, {**image, "messages": [{"role": "user", "content": "hi"}], "user": "ali@firma.com"}):
        assert httpx.post(g.url + "/v1/chat/completions", json=body, headers=headers, timeout=30).status_code == 200
    assert chats(ext) == [] and len(chats(local)) == 3
    rows = admin.client.get("/admin/routing/audit").json()["data"]
    assert {tuple(r["reasons"]) for r in rows} >= {("detector",), ("uninspectable_content",)}


def test_sensitive_with_local_full_is_a_clear_503(gw) -> None:
    g, admin, local, ext = gw
    assert put_routes(admin, STANDARD).status_code == 200
    key = admin.key(admin.tenant()["id"])["key"]
    local.behaviour.fail_next = [429]  # the local engine is full
    r = chat(g, key, f"kimlik {TCKN}")
    assert r.status_code == 503 and r.json()["error"]["code"] == "local_backend_unavailable"
    assert chats(ext) == []


def test_explain_is_a_dry_run_and_get_reports_stale_rules(gw) -> None:
    g, admin, local, ext = gw
    assert put_routes(admin, STANDARD).status_code == 200
    t = admin.tenant()
    r = admin.client.post("/admin/routes/explain", json={"tenant_id": t["id"], "request": {
        "model": "chat", "messages": [{"role": "user", "content": f"no {TCKN}"}]}})
    assert r.status_code == 200, r.text
    assert r.json() | {"reason": None} == {"object": "route_explanation", "routed": True, "backends": ["local-llm"],
                                           "rule_id": "pii-local", "sensitive": True, "finding_kinds": ["tckn"],
                                           "reason": None}
    r = admin.client.post("/admin/routes/explain", json={"request": {"model": "nope", "messages": []}})
    assert r.json()["routed"] is False and r.json()["status"] == 404
    assert admin.client.post("/admin/routes/explain", json={"request": "x"}).status_code == 400
    assert chats(local) == [] and chats(ext) == []  # nothing was sent
    assert admin.client.get("/admin/routes").json()["problems"] == []
    assert admin.client.delete("/admin/backends/ext-gpt").status_code == 200
    problems = admin.client.get("/admin/routes").json()["problems"]
    assert problems and "unknown backend 'ext-gpt'" in problems[0]


def test_rules_and_audit_on_postgresql(make_gateway, upstream) -> None:
    """The same tables and JSON columns on PostgreSQL (migration 0002_routing)."""
    g, admin = make_gateway(db="postgres")
    rules = [{"id": "all-up", "match": {"model": "chat", "sensitivity": "public", "max_prompt_tokens": 4000},
              "backend": "up"}]
    assert put_routes(admin, rules).status_code == 200
    assert admin.client.get("/admin/routes").json()["rules"] == [{**rules[0], "fallbacks": []}]
    t = admin.tenant()
    key = admin.key(t["id"])["key"]
    assert chat(g, key, "hello there").status_code == 200
    r = chat(g, key, f"kimlik {TCKN}")  # "up" is external: refused, not leaked
    assert r.status_code == 503 and r.json()["error"]["code"] == "no_local_backend"
    rows = admin.client.get("/admin/routing/audit", params={"tenant_id": t["id"]}).json()["data"]
    assert [(x["rule_id"], x["status"], x["finding_kinds"]) for x in rows] == [
        (None, 503, ["tckn"]), ("all-up", 200, [])]


def test_models_list_rule_aliases_and_retrieve_one(gw) -> None:
    g, admin, _, _ = gw
    rules = [*STANDARD, {"id": "glob", "match": {"model": "gpt-*", "sensitivity": "public"}, "backend": "ext-gpt"}]
    assert put_routes(admin, rules).status_code == 200
    tenant = admin.tenant()
    key = admin.key(tenant["id"])["key"]
    with openai.OpenAI(base_url=g.url + "/v1", api_key=key, max_retries=0) as c:
        # the rules' plain model name is listed; a glob names no model
        assert [m.id for m in c.models.list()] == ["chat", "dead-local", "ext-gpt", "local-llm"]
        assert c.models.retrieve("chat").id == "chat"
        with pytest.raises(openai.NotFoundError):
            c.models.retrieve("gpt-*")
        admin.quota(tenant["id"], allowed_models=["chat"])
        assert [m.id for m in c.models.list()] == ["chat"]
        with pytest.raises(openai.NotFoundError) as err:
            c.models.retrieve("ext-gpt")
        assert err.value.body["code"] == "model_not_found"
    r = httpx.get(g.url + "/v1/models/chat")
    assert r.status_code == 401 and r.json()["error"]["code"] == "missing_api_key"
