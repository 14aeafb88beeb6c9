"""The gateway's liveness endpoint answers without auth and reveals nothing else."""

from __future__ import annotations

import httpx


def test_health_answers_without_auth(make_gateway):
    gw, _admin = make_gateway()
    r = httpx.get(gw.url + "/health")
    assert r.status_code == 200
    assert r.json() == {"status": "ok"}
    # a tenant route on the same server still wants a key
    assert httpx.get(gw.url + "/v1/models").status_code == 401
