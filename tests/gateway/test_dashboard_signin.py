"""Dashboard sign-in as an attacker tries it (issue 35), over real HTTP: wrong tokens throttled by
the admin API's own throttle, a session cookie dead once its owner logged out (on every replica),
login forms refusing cross-site posts, and the admin overview on PostgreSQL with audited routing."""

from __future__ import annotations

import httpx

from fairgate.gateway.settings import Settings
from tests.gateway.harness import ADMIN_TOKEN, GatewayThread

ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}"}


def test_wrong_dashboard_tokens_are_throttled_like_the_admin_api(make_gateway) -> None:
    gw, admin = make_gateway(auth_failures_max=20)
    key = admin.key(admin.tenant()["id"])["key"]
    with httpx.Client(base_url=gw.url) as c:
        for i in range(20):  # each sign-in door counts into the one throttle of this address
            door = i % 3
            if door == 0:
                r = c.post("/admin/dashboard/login", data={"token": f"guess-{i}"})
            elif door == 1:
                r = c.post("/dashboard/login", data={"token": f"fg-guess-{i}"})
            else:
                r = c.get("/admin/dashboard", headers={"authorization": f"Bearer guess-{i}"})
            assert r.status_code == 401, (i, r.status_code)
        # the 21st try, even with the right token, waits out the window, at every door
        for r in (c.post("/admin/dashboard/login", data={"token": ADMIN_TOKEN}),
                  c.get("/admin/dashboard", headers=ADMIN),
                  c.post("/dashboard/login", data={"token": key}),
                  httpx.get(gw.url + "/admin/tenants", headers=ADMIN)):
            assert r.status_code == 429, r.text[:200]
            assert int(r.headers["retry-after"]) >= 1 and "set-cookie" not in r.headers


def test_admin_api_failures_throttle_the_dashboard_too(make_gateway) -> None:
    gw, _ = make_gateway(auth_failures_max=3)
    for i in range(3):
        assert httpx.get(gw.url + "/admin/tenants", headers={"authorization": f"Bearer g{i}"}).status_code == 401
    r = httpx.post(gw.url + "/admin/dashboard/login", data={"token": ADMIN_TOKEN})
    assert r.status_code == 429 and "set-cookie" not in r.headers


def _sign_in(c: httpx.Client, path: str, token: str) -> str:
    r = c.post(path, data={"token": token})
    assert r.status_code == 303, r.text[:200]
    return c.cookies["fairgate_dashboard"]


def test_a_cookie_replayed_after_logout_is_refused_on_every_replica(make_gateway, tmp_path) -> None:
    gw, admin = make_gateway(db="postgres")
    key = admin.key(admin.tenant()["id"])["key"]
    peer_settings = Settings(admin_token=ADMIN_TOKEN, database_url=gw.state.settings.database_url,
                             embedded_engine=False)
    with GatewayThread(peer_settings) as peer:
        for login, page, logout in (("/admin/dashboard/login", "/admin/dashboard", "/admin/dashboard/logout"),
                                    ("/dashboard/login", "/dashboard", "/dashboard/logout")):
            token = ADMIN_TOKEN if login.startswith("/admin") else key
            with httpx.Client(base_url=gw.url) as c:
                cookie = _sign_in(c, login, token)
                kept = _sign_in(httpx.Client(base_url=gw.url), login, token)  # a second session of the same user
                for url in (gw.url, peer.url):  # a session is good on every replica
                    assert httpx.get(url + page, cookies={"fairgate_dashboard": cookie}).status_code == 200
                assert c.post(logout).status_code == 303
            for url in (gw.url, peer.url):
                replay = httpx.get(url + page, cookies={"fairgate_dashboard": cookie})
                assert replay.status_code == 303 and replay.headers["location"] == login, (url, page)
                # logging out ends that session only
                assert httpx.get(url + page, cookies={"fairgate_dashboard": kept}).status_code == 200


def test_a_cross_site_login_post_sets_no_cookie(make_gateway) -> None:
    gw, admin = make_gateway()
    key = admin.key(admin.tenant()["id"])["key"]
    host = gw.url.removeprefix("http://")
    cross_site = ({"origin": "https://evil.example"},
                  {"origin": "null"},
                  {"sec-fetch-site": "cross-site"},
                  {"sec-fetch-site": "same-site", "origin": "http://sub." + host},
                  {"sec-fetch-site": "cross-site", "origin": gw.url})  # Sec-Fetch-Site decides when sent
    for path, token in (("/dashboard/login", key), ("/admin/dashboard/login", ADMIN_TOKEN)):
        for headers in cross_site:
            r = httpx.post(gw.url + path, data={"token": token}, headers=headers)
            assert r.status_code == 403 and "set-cookie" not in r.headers, (path, headers)
            assert "cross-site" in r.text
        # the browser's own form (same origin), and clients that send neither header (curl)
        for headers in ({"origin": gw.url, "sec-fetch-site": "same-origin"}, {"origin": gw.url}, {}):
            r = httpx.post(gw.url + path, data={"token": token}, headers=headers)
            assert r.status_code == 303 and "fairgate_dashboard=" in r.headers["set-cookie"], (path, headers)


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


def test_sign_ins_keep_a_bounded_number_of_sessions(make_gateway) -> None:
    from fairgate.gateway.dashboard.sessions import MAX_SESSIONS
    from fairgate.gateway.store.tables import DashboardSession

    gw, admin = make_gateway()
    key = admin.key(admin.tenant()["id"])["key"]
    cookies = [_sign_in(httpx.Client(base_url=gw.url), "/admin/dashboard/login", ADMIN_TOKEN)
               for _ in range(MAX_SESSIONS + 2)]
    _sign_in(httpx.Client(base_url=gw.url), "/dashboard/login", key)  # a key's sessions are its own
    ok = [httpx.get(gw.url + "/admin/dashboard", cookies={"fairgate_dashboard": c}).status_code == 200
          for c in cookies]
    assert ok == [False, False] + [True] * MAX_SESSIONS  # the oldest ended first
    with gw.state.sessions() as s:
        assert s.query(DashboardSession).count() == MAX_SESSIONS + 1
