"""Served and refused kept apart (issue 37): a refusal is counted by reason in
`fairgate_refusals_total`, named in its log line with the tenant once the key was good, and kept
out of the latency histograms, which only answered requests feed."""

from __future__ import annotations

import logging
import time

import httpx

from tests.gateway.harness import ADMIN_TOKEN
from tests.gateway.test_metrics import parse, value


def test_refusals_are_counted_by_reason_and_kept_out_of_latency(make_gateway, upstream, caplog):
    caplog.set_level(logging.INFO, "fairgate.requests")
    gw, admin = make_gateway()
    tenant = admin.tenant()["id"]
    admin.quota(tenant, requests_per_minute=2)
    key = admin.key(tenant)["key"]
    url = gw.url + "/v1/chat/completions"
    h = {"authorization": f"Bearer {key}"}
    body = {"model": "up", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(url, json=body, headers=h, timeout=30).status_code == 200
    assert httpx.post(url, json=body, headers={"authorization": "Bearer fg-wrong"}, timeout=30).status_code == 401
    assert httpx.post(url, json={**body, "temperature": 9}, headers=h, timeout=30).status_code == 400
    assert httpx.post(url, json={**body, "model": "nope"}, headers=h, timeout=30).status_code == 404
    upstream.behaviour.fail_next = [400]  # the backend refuses it: no answer, after admission
    try:
        assert httpx.post(url, json=body, headers=h, timeout=30).status_code == 400
    finally:
        upstream.behaviour.fail_next = []
    assert httpx.post(url, json=body, headers=h, timeout=30).status_code == 429  # its 3rd admitted request this minute

    route = "/v1/chat/completions"
    for _ in range(100):  # observers run after the response went out
        samples = parse(httpx.get(gw.url + "/metrics", headers={"authorization": f"Bearer {ADMIN_TOKEN}"}).text)
        if value(samples, "fairgate_refusals_total") >= 5:
            break
        time.sleep(0.05)
    got = {reason: value(samples, "fairgate_refusals_total", route=route, reason=reason)
           for reason in ("auth", "validation", "no_backend", "quota")}
    assert got == {"auth": 1, "validation": 2, "no_backend": 1, "quota": 1}, got
    # one answered request: one latency observation; the backend's refusal is a request row, not a latency
    assert value(samples, "fairgate_e2e_request_latency_seconds_count") == 1
    assert value(samples, "fairgate_requests_total", status="failed", code="400") == 1
    lines = [r.getMessage() for r in caplog.records if r.name == "fairgate.requests" and "refused" in r.getMessage()]
    quota_line = next(x for x in lines if "http=429" in x)
    assert f"tenant={tenant}" in quota_line and "reason=quota" in quota_line
    auth_line = next(x for x in lines if "http=401" in x)
    assert "tenant=-" in auth_line and "reason=auth" in auth_line
