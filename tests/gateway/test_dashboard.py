"""The dashboard over real HTTP: a gateway with its embedded tiny engine after a small recorded
load. Who may see what (admin token, tenant key, session cookies and their flags, tampering,
revocation), and that each panel's plots carry the figures the load produced."""

from __future__ import annotations

import re

import httpx
import pytest
from itsdangerous import URLSafeTimedSerializer

from fairgate.gateway.dashboard import routes
from fairgate.gateway.dashboard.panels import advice_items
from fairgate.gateway.settings import Settings
from tests.gateway.harness import ADMIN_TOKEN, Admin, GatewayThread
from tests.helpers.dashboard_load import SECRET_PROMPT, run_load


@pytest.fixture(scope="module")
def loaded(tmp_path_factory, tiny_model_dir):
    db = tmp_path_factory.mktemp("dash") / "d.db"
    # tenant labels on: the cache panel breaks hit rates down by tenant (off, they merge into one)
    settings = Settings(admin_token=ADMIN_TOKEN, database_url=f"sqlite:///{db}", model=str(tiny_model_dir),
                        metrics_tenant_labels=True)
    with GatewayThread(settings) as gw:
        admin = Admin(gw.url)
        load = run_load(gw.url, admin, tiny_model_dir.name)
        assert gw.call(gw.state.usage.flush())
        yield gw, admin, load
        admin.close()


def values(html: str, panel: str) -> list[float]:
    """data-value of every point and bar inside the panel's <section>."""
    section = html.split(f'<section id="{panel}"', 1)[1].split("</section>", 1)[0]
    return [float(v) for v in re.findall(r'data-value="([^"]+)"', section)]


def test_admin_page_shows_every_panel_with_the_loads_figures(loaded):
    gw, _, load = loaded
    r = httpx.get(gw.url + "/admin/dashboard", headers={"authorization": f"Bearer {ADMIN_TOKEN}"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "script" not in r.headers["content-security-policy"] and "<script" not in r.text
    html = r.text
    for panel in ("advice", "usage", "latency", "cache", "quota", "routing", "engine"):
        assert f'<section id="{panel}"' in html
    assert "docs-team" in html and "billing-team" in html
    # usage: the tokens line of each tenant peaks at what its requests used (one hour bucket)
    with gw.state.sessions() as s:
        from sqlalchemy import func, select

        from fairgate.gateway.store.tables import UsageRecord
        per_tenant = dict(s.execute(select(UsageRecord.tenant_id, func.sum(UsageRecord.total_tokens))
                                    .group_by(UsageRecord.tenant_id)).tuples().all())
    usage = values(html, "usage")
    assert per_tenant[load.tenant_a["id"]] in usage and per_tenant[load.tenant_b["id"]] in usage
    assert "cost / 1M tokens" in html
    # latency: three streamed requests had a TTFT; p50 <= p95 for each route
    ttft = values(html, "latency")
    assert len(ttft) >= 4 and ttft[0] <= ttft[1] and all(v > 0 for v in ttft)
    # cache: docs-team repeated its system prompt (hits), billing-team ran it once (0%)
    cache = values(html, "cache")
    assert any(0 < v < 100 for v in cache) and 0.0 in cache
    # quota: docs-team's daily limit of 5000 tokens, partly used
    quota = values(html, "quota")
    assert quota and quota[0] == pytest.approx(per_tenant[load.tenant_a["id"]] / 5000 * 100)
    assert values(html, "routing")[0] == 4  # four requests, all on the local engine
    assert 'data-value="0"' in html.split('<section id="engine"', 1)[1]  # idle KV use
    # advice: the gateway's own `fairgate advise` over the page's window (gateway/admin/advice.py)
    advice = html.split('<section id="advice"', 1)[1].split("</section>", 1)[0]
    assert "No advisor is configured" not in advice and "could not" not in advice.lower()
    assert "<ul class=\"advice\">" in advice and "/v1/chat/completions" in advice  # the load's route
    assert SECRET_PROMPT not in html


def test_login_sets_a_strict_signed_cookie_and_logout_ends_it(loaded):
    gw, _, _ = loaded
    with httpx.Client(base_url=gw.url) as c:
        first = c.get("/admin/dashboard")
        assert first.status_code == 303 and first.headers["location"] == "/admin/dashboard/login"
        login = c.get("/admin/dashboard/login").text
        assert 'name="token"' in login and "<title>Sign in: fairgate admin dashboard</title>" in login
        bad = c.post("/admin/dashboard/login", data={"token": "nope"})
        assert bad.status_code == 401 and "set-cookie" not in bad.headers
        ok = c.post("/admin/dashboard/login", data={"token": ADMIN_TOKEN})
        assert ok.status_code == 303 and ok.headers["location"] == "/admin/dashboard"
        flags = ok.headers["set-cookie"].lower()
        assert "httponly" in flags and "samesite=strict" in flags and "max-age=28800" in flags
        assert ADMIN_TOKEN not in ok.headers["set-cookie"]
        assert c.get("/admin/dashboard").status_code == 200
        cookie = c.cookies["fairgate_dashboard"]
        payload, _, signature = cookie.rpartition(".")
        flipped = signature[:5] + ("A" if signature[5] != "A" else "B") + signature[6:]
        other_key = URLSafeTimedSerializer("not-the-key", salt="fairgate.dashboard").dumps({"role": "admin"})
        for forged in (f"{payload}.{flipped}", other_key):
            r = httpx.get(gw.url + "/admin/dashboard", cookies={"fairgate_dashboard": forged})
            assert r.status_code == 303  # tampered: back to the login form
        out = c.post("/admin/dashboard/logout")
        assert out.status_code == 303 and 'fairgate_dashboard=""' in out.headers["set-cookie"]
        assert c.get("/admin/dashboard").status_code == 303
    assert httpx.get(gw.url + "/admin/dashboard", headers={"authorization": "Bearer wrong"}).status_code == 401


def test_tenant_sees_only_its_own_usage_and_a_revoked_key_ends_its_session(loaded):
    gw, admin, load = loaded
    own = httpx.get(gw.url + "/dashboard", headers={"authorization": f"Bearer {load.key_b}"})
    assert own.status_code == 200 and "tenant billing-team" in own.text
    assert "docs-team" not in own.text and load.tenant_a["id"] not in own.text
    assert values(own.text, "usage") and max(values(own.text, "usage")) > 0
    refused = httpx.get(gw.url + "/admin/dashboard", headers={"authorization": f"Bearer {load.key_b}"})
    assert refused.status_code == 403
    as_admin = httpx.get(gw.url + f"/admin/dashboard/tenants/{load.tenant_a['id']}",
                         headers={"authorization": f"Bearer {ADMIN_TOKEN}"})
    assert as_admin.status_code == 200 and "tenant docs-team" in as_admin.text
    odd = httpx.get(gw.url + "/admin/dashboard/tenants/a%00b", headers={"authorization": f"Bearer {ADMIN_TOKEN}"})
    assert odd.status_code == 404
    unknown = httpx.get(gw.url + "/admin/dashboard/tenants/0123", headers={"authorization": f"Bearer {ADMIN_TOKEN}"})
    assert unknown.status_code == 404 and "No such tenant" in unknown.text

    spare = admin.key(load.tenant_b["id"])
    with httpx.Client(base_url=gw.url) as c:
        assert c.post("/dashboard/login", data={"token": "fg-not-a-key"}).status_code == 401
        assert c.post("/dashboard/login", data={"token": spare["key"]}).status_code == 303
        assert c.get("/dashboard").status_code == 200
        assert c.get("/admin/dashboard").status_code == 403  # a tenant session is no admin session
        assert admin.client.delete(f"/admin/keys/{spare['prefix']}").status_code in (200, 204)
        assert c.get("/dashboard").status_code == 303  # revoked: the session is over


async def test_advice_slot_renders_the_providers_items(loaded):
    gw, _, _ = loaded
    from starlette.applications import Starlette

    calls = []

    async def advise(state, hours):
        calls.append(hours)
        return [{"title": "Turn on speculative decoding", "route": "/v1/chat/completions", "why": "decode-bound"},
                "Add a replica at 09:00"]

    app = Starlette(routes=routes(advice=advise))
    app.state.gateway = gw.state
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://dash") as c:
        r = await c.get("/admin/dashboard?hours=48", headers={"authorization": f"Bearer {ADMIN_TOKEN}"})
    assert r.status_code == 200 and calls == [48]
    advice = r.text.split('<section id="advice"', 1)[1].split("</section>", 1)[0]
    assert "Turn on speculative decoding" in advice and "why: decode-bound" in advice
    assert "Add a replica at 09:00" in advice


def test_advice_items_take_strings_mappings_and_dataclasses():
    from dataclasses import dataclass

    @dataclass
    class Advice:
        lever: str
        detail: str

    assert advice_items(["a", {"title": "b", "x": 1}, Advice("c", "d")]) == [
        {"title": "a", "detail": ""}, {"title": "b", "detail": "x: 1"}, {"title": "c", "detail": "detail: d"}]
