"""The dashboard over real HTTP: a gateway with its embedded tiny engine after a small recorded
load. Who may see what (admin token, tenant key, session cookies and their flags, tampering,
revocation), and that each panel's plots carry the figures the load produced."""

from __future__ import annotations

import re
import statistics
from html import unescape

import httpx
import pytest
from itsdangerous import URLSafeTimedSerializer

from fairgate.gateway.dashboard import routes
from fairgate.gateway.dashboard.advice_text import AdviceItem, advice_items
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


def section(html: str, panel: str) -> str:
    return html.split(f'<section id="{panel}"', 1)[1].split("</section>", 1)[0]


def values(html: str, panel: str) -> list[float]:
    """data-value of every point and bar inside the panel's <section>."""
    return [float(v) for v in re.findall(r'data-value="([^"]+)"', section(html, panel))]


def assert_every_plot_labelled(html: str) -> int:
    """Every <svg> plot: a title; drawn ones both axes named (the value axis with a unit in
    brackets), every bar a label and every line series a legend entry. Returns the plots drawn."""
    plots = re.findall(r"<svg\b.*?</svg>", html, re.S)
    drawn = 0
    for svg in plots:
        assert re.search(r"<title>[^<]+</title>", svg), svg[:200]
        if "plot-empty" in svg:
            assert re.search(r'class="empty"[^>]*>[^<]+<', svg)  # it says why it is empty
            continue
        drawn += 1
        axes = dict(re.findall(r'data-axis="(\w)"[^>]*>([^<]+)<', svg))
        assert axes.keys() == {"x", "y"} and all(v.strip() for v in axes.values()), svg[:300]
        value_axis = axes["x"] if 'data-kind="bar"' in svg else axes["y"]
        assert re.fullmatch(r".+ \(.+\)", unescape(value_axis)), value_axis  # e.g. "latency (ms)"
        bars = re.findall(r'<rect class="bar"[^>]*data-label="([^"]*)"', svg)
        shown = re.findall(r'class="bar-label"[^>]*>([^<]*)<', svg)
        assert len(bars) == len(shown) == svg.count('class="bar"') and all(b.strip() for b in bars + shown), svg
        series = re.findall(r'class="series" data-series="([^"]*)"', svg)
        assert series == re.findall(r'class="legend" data-series="([^"]*)"', svg) and all(series)
    return drawn


def advice_of(html: str) -> list[tuple[str, str]]:
    """(title, sentence) of each item of the advice panel, as text."""
    found = re.findall(r'<li class="advice-item"><strong class="advice-title">(.*?)</strong>'
                       r'(?:<br><span class="advice-sentence">(.*?)</span>)?', section(html, "advice"))
    return [(unescape(t), unescape(s)) for t, s in found]


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
    engine = html.split('<section id="engine"', 1)[1].split("</section>", 1)[0]
    assert 'data-value="0"' in engine  # idle KV use
    # fairness: nobody waits now, so no tenant is backlogged and the index is 1 (issue 36)
    assert "fairness (Jain, last 15 s)" in engine and "<td>1.00</td>" in engine
    # advice: the gateway's own `fairgate advise` over the page's window (gateway/admin/advice.py)
    advice = html.split('<section id="advice"', 1)[1].split("</section>", 1)[0]
    assert "No advisor is configured" not in advice and "could not" not in advice.lower()
    assert "<ul class=\"advice\">" in advice and "/v1/chat/completions" in advice  # the load's route
    assert SECRET_PROMPT not in html
    # the advice reads as sentences with their numbers, never a dict dump
    items = advice_of(html)
    assert items and len(items) == advice.count("<li")
    for title, sentence in items:
        text = title + " " + sentence
        assert not re.search(r"[{}]|': |\w_\w", text), text
        assert sentence.endswith(".") and re.search(r"\d", sentence), (title, sentence)
    assert any(t.startswith("/v1/chat/completions · ") and "too little data" in t for t, _ in items)
    assert assert_every_plot_labelled(html) >= 8


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
    # its refused request (over the context) is counted by reason, not timed: one answered request
    latency = unescape(section(own.text, "latency"))
    assert "1 refused request is left out of the latency figures: 1 context length (HTTP 400)" in latency
    assert re.search(r"<td>end-to-end</td><td>/v1/chat/completions</td><td>1</td>", latency)
    assert_every_plot_labelled(own.text)
    refused = httpx.get(gw.url + "/admin/dashboard", headers={"authorization": f"Bearer {load.key_b}"})
    assert refused.status_code == 403
    # the usage reports count it by reason too: the tenant's own, and the admin's for every tenant
    own_usage = httpx.get(gw.url + "/v1/usage", headers={"authorization": f"Bearer {load.key_b}"}).json()
    assert own_usage["refusals"] == [{"reason": "context_length", "requests": 1}]
    every = httpx.get(gw.url + "/admin/usage", headers={"authorization": f"Bearer {ADMIN_TOKEN}"}).json()
    assert every["refusals"] == [{"tenant_id": load.tenant_b["id"], "reason": "context_length", "requests": 1}]
    rows = httpx.get(gw.url + "/admin/usage/requests", params={"tenant": load.tenant_b["id"], "http_status": 400},
                     headers={"authorization": f"Bearer {ADMIN_TOKEN}"}).json()["data"]
    assert [r["error_code"] for r in rows] == ["context_length_exceeded"]
    as_admin = httpx.get(gw.url + f"/admin/dashboard/tenants/{load.tenant_a['id']}",
                         headers={"authorization": f"Bearer {ADMIN_TOKEN}"})
    assert as_admin.status_code == 200 and "tenant docs-team" in as_admin.text
    assert "docs-team&#39;s latency" in as_admin.text and "Your latency" not in as_admin.text
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
    assert advice_of(r.text) == [("Turn on speculative decoding", "decode-bound"), ("Add a replica at 09:00", "")]


def test_advice_items_take_strings_mappings_and_dataclasses():
    from dataclasses import dataclass

    @dataclass
    class Advice:
        lever: str
        detail: str

    # text fields only: a provider's numbers are never dumped as "key: value"
    assert advice_items(["a", {"title": "b", "x": 1, "why": "it is slow"}, Advice("c", "d")]) == [
        AdviceItem("a", ""), AdviceItem("b", "it is slow"), AdviceItem("c", "d")]


def test_tenant_page_shows_its_own_latency_and_cache_figures(loaded):
    gw, _, load = loaded
    r = httpx.get(gw.url + "/dashboard", headers={"authorization": f"Bearer {load.key_a}"})
    assert r.status_code == 200
    html = unescape(r.text)
    with gw.state.sessions() as s:
        from sqlalchemy import select

        from fairgate.gateway.store.tables import UsageRecord
        rows = s.execute(select(UsageRecord.latency_ms, UsageRecord.ttft_ms, UsageRecord.prompt_tokens,
                                UsageRecord.cached_tokens).where(UsageRecord.tenant_id == load.tenant_a["id"])).all()
    assert len(rows) == 3
    # its own figures, in its own wording, from its usage rows (no tenant labels needed)
    latency, cache = section(html, "latency"), section(html, "cache")
    assert ">Your latency (answered requests, every replica)<" in latency and ">Your prefix-cache hit rate" in cache
    p50 = statistics.median(latency for latency, _, _, _ in rows)
    assert f"<td>end-to-end</td><td>/v1/chat/completions</td><td>3</td><td>{p50:.1f}</td>" in latency
    ttft = sorted(t for _, t, _, _ in rows if t is not None)
    assert ttft and f"<td>TTFT</td><td>/v1/chat/completions</td><td>{len(ttft)}</td>" in latency
    assert values(r.text, "latency") and all(v > 0 for v in values(r.text, "latency"))
    prompt, cached = sum(p for _, _, p, _ in rows), sum(c for _, _, _, c in rows)
    assert cached > 0  # docs-team repeated its system prompt
    assert f"<td>{prompt}</td><td>{cached}</td><td>{cached / prompt * 100:.1f}%</td>" in cache
    assert values(r.text, "cache") == [pytest.approx(cached / prompt * 100)]
    assert "no data yet" not in latency + cache and "refused" not in latency
    assert "per tenant" not in html and "No tenant has" not in html  # no admin wording
    assert assert_every_plot_labelled(r.text) >= 4
