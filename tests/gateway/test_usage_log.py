"""GET /admin/usage/requests: every stored row once, newest first, in pages linked by `after`
and `next`, filtered, and OpenAI-style errors for bad parameters."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import httpx

from fairgate.gateway.store.tables import UsageRecord

T0 = datetime(2026, 11, 30, 8)


def seed(gw, n: int = 25) -> list[UsageRecord]:
    rows = []
    for i in range(n):
        rows.append(UsageRecord(
            request_id=f"chatcmpl-{i:03d}", tenant_id="ta" if i % 3 else "tb", key_prefix="fg-k", model="m",
            backend="gpu" if i % 2 else "ext", priority="standard", status="failed" if i % 5 == 0 else "finished",
            stream=False, prompt_tokens=i, completion_tokens=1, total_tokens=i + 1, cost=0.0,
            http_status=502 if i % 5 == 0 else 200, latency_ms=10.0,
            # two rows share each second: the id breaks the tie, so paging still sees each once
            created_at=T0 + timedelta(seconds=i // 2)))
    with gw.state.sessions.begin() as s:
        s.add_all(rows)
    return rows


def ids(page: dict) -> list[str]:
    return [e["id"] for e in page["data"]]


def test_pages_cover_every_row_once_newest_first(make_gateway):
    gw, admin = make_gateway()
    seed(gw)
    want = [f"chatcmpl-{i:03d}" for i in range(24, -1, -1)]
    pages = 0
    first = admin.client.get("/admin/usage/requests?limit=10").json()
    assert first["object"] == "list" and first["has_more"] is True and ids(first) == want[:10]
    assert first["first_id"] == want[0] and first["last_id"] == want[9]
    url = first["next"]
    assert url.startswith(gw.url) and f"after={want[9]}" in url
    got = ids(first)
    while url:
        page = admin.client.get(url).json()
        got += ids(page)
        url = page["next"]
        pages += 1
    assert got == want and pages == 2
    entry = first["data"][0]
    assert entry == {"id": "chatcmpl-024", "object": "usage.request", "created_at": "2026-11-30T08:00:12Z",
                     "tenant_id": "tb", "key_prefix": "fg-k", "model": "m", "backend": "ext",
                     "priority": "standard", "status": "finished", "http_status": 200, "error_code": None, "stream": False,
                     "prompt_tokens": 24, "completion_tokens": 1, "total_tokens": 25, "cached_tokens": 0,
                     "usage_estimated": False,
                     "cost": 0.0, "ttft_ms": None, "latency_ms": 10.0}
    asc = admin.client.get("/admin/usage/requests?order=asc&limit=3&after=chatcmpl-004").json()
    assert ids(asc) == ["chatcmpl-005", "chatcmpl-006", "chatcmpl-007"]


def test_filters(make_gateway):
    gw, admin = make_gateway()
    seed(gw)
    get = lambda q: ids(admin.client.get(f"/admin/usage/requests?limit=1000&{q}").json())  # noqa: E731
    assert get("tenant=tb") == [f"chatcmpl-{i:03d}" for i in range(24, -1, -1) if i % 3 == 0]
    assert get("backend=gpu&status=failed") == ["chatcmpl-015", "chatcmpl-005"]
    assert get("http_status=502") == [f"chatcmpl-{i:03d}" for i in (20, 15, 10, 5, 0)]
    assert get("from=2026-11-30T08:00:10Z&to=2026-11-30T08:00:11Z") == ["chatcmpl-021", "chatcmpl-020"]
    assert get("model=other") == []
    page = admin.client.get("/admin/usage/requests?tenant=tb&limit=2").json()
    nxt = admin.client.get(page["next"]).json()  # the filters travel in the next link
    assert ids(nxt) == ["chatcmpl-018", "chatcmpl-015"]


def test_real_requests_appear(make_gateway):
    gw, admin = make_gateway()
    t = admin.tenant()
    key = admin.key(t["id"])["key"]
    r = httpx.post(gw.url + "/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                   json={"model": "up", "messages": [{"role": "user", "content": "hi there"}], "max_tokens": 3})
    assert r.status_code == 200
    deadline = time.time() + 10
    while gw.state.usage.written < 1 and time.time() < deadline:
        time.sleep(0.05)
    page = admin.client.get(f"/admin/usage/requests?tenant={t['id']}").json()
    assert ids(page) == [r.json()["id"]] and page["data"][0]["completion_tokens"] == 3
    assert page["has_more"] is False and page["next"] is None


def test_bad_parameters(make_gateway):
    gw, admin = make_gateway()
    for query, param in [("limit=0", "limit"), ("limit=1001", "limit"), ("limit=ten", "limit"),
                         ("order=up", "order"), ("status=done", "status"), ("after=nope", "after"),
                         ("http_status=9", "http_status"), ("from=soon", "from"), ("tenat=x", "tenat")]:
        r = admin.client.get(f"/admin/usage/requests?{query}")
        assert r.status_code == 400, query
        err = r.json()["error"]
        assert err["param"] == param and err["type"] == "invalid_request_error", query
    assert httpx.get(gw.url + "/admin/usage/requests").status_code == 401
