"""Upstreams that fail at the TCP level (raw asyncio servers of ours on loopback): one that
hangs (connects, reads, never answers), one that resets the connection mid-body, one that
trickles a byte a second. Each request ends in a clear OpenAI error (504 for time, 502 for a
broken connection; in-band for a stream that had started), a fallback when one is configured,
one usage row, no reservation held and no upstream connection left open."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import httpx
import orjson
import pytest

from tests.faults.engines import wait_until
from tests.faults.figures import Figures, chat_body
from tests.faults.stack import Stack, stack
from tests.helpers.raw_upstream import RawUpstream

TIMEOUT_S = 1.5  # upstream_timeout_s: idle read, head and whole-body limit


def call(s: Stack, key: str, model: str, stream: bool) -> tuple[int, dict[str, Any] | None, float]:
    """(status, the error object if any — in the body or in-band in a stream, seconds taken)."""
    t0 = time.monotonic()
    r = httpx.post(s.gw.url + "/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                   json=chat_body(model, max_tokens=5, stream=stream), timeout=60)
    took = time.monotonic() - t0
    if r.status_code != 200:
        return r.status_code, r.json()["error"], took
    if not stream:
        return 200, None, took
    events = [orjson.loads(line[6:]) for line in r.text.split("\n") if line.startswith("data: {")]
    errors = [e["error"] for e in events if "error" in e]
    assert r.text.rstrip().endswith("data: [DONE]")  # a terminated stream, never a hung one
    return 200, errors[0] if errors else None, took


def run(s: Stack, up: RawUpstream, name: str, tenant: str, key: str, model: str) -> tuple[list, Figures]:
    results = [call(s, key, model, stream) for stream in (False, True, False, True)]
    # a request settles just after its answer went out: give the last one a moment to be handed
    # to the writer (a row truly lost stays missing and fails below)
    deadline = time.monotonic() + 10
    while True:
        s.settle_writers()
        if s.usage_rows(tenant) >= len(results) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    wait_until(lambda: up.open_connections == 0, 10)  # the gateway closed every upstream connection
    fig = Figures(name, served=sum(1 for st, err, _ in results if st == 200 and err is None),
                  refused=sum(1 for st, err, _ in results if err is not None), rows_written=s.usage_rows(tenant),
                  leaked=s.leaked(tenant),
                  statuses=dict(Counter(f"{st}:{err['code'] if err else 'ok'}" for st, err, _ in results)))
    fig.rows_lost = len(results) - fig.rows_written
    return results, fig


@pytest.mark.parametrize("mode", ["hang", "reset", "trickle"])
def test_misbehaving_upstream(mode, upstream, tmp_path, fault_report):
    with RawUpstream(mode, interval_s=0.3) as up, stack(upstream, tmp_path, upstream_timeout_s=TIMEOUT_S) as s:
        s.admin.backend(mode, up.base_url, model="m")
        tenant, key = s.tenant_key(max_concurrent=4)
        results, fig = run(s, up, f"upstream {mode}s", tenant, key, mode)
        fault_report(fig)
        assert (fig.rows_lost, fig.leaked, up.open_connections) == (0, 0, 0)
        for (status, err, took), stream in zip(results, (False, True, False, True), strict=True):
            assert err is not None and err["type"] == "server_error" and err["message"]
            if mode == "reset" and stream:  # two events went out, then the in-band error
                assert status == 200 and err["code"] == "upstream_error"
            elif mode == "reset":
                assert status == 502 and err["code"] == "upstream_error"
            else:  # nothing complete arrived in time
                assert status == 504 and err["code"] == "upstream_timeout"
                assert took < TIMEOUT_S * 2 + 3  # the limit, not the trickle's 100+ s


def test_hanging_upstream_falls_back(upstream, tmp_path, fault_report):
    with RawUpstream("hang") as up, stack(upstream, tmp_path, upstream_timeout_s=TIMEOUT_S) as s:
        s.admin.backend("hang", up.base_url, model="m")
        r = s.admin.client.put("/admin/routes", json=[
            {"match": {"model": "hang", "sensitivity": "public"}, "backend": "hang", "fallbacks": ["up"]}])
        assert r.status_code == 200, r.text
        tenant, key = s.tenant_key(max_concurrent=4)
        results, fig = run(s, up, "upstream hangs, fallback", tenant, key, "hang")
        fault_report(fig)
        assert [(st, err) for st, err, _ in results] == [(200, None)] * 4
        assert (fig.rows_lost, fig.leaked, up.open_connections, up.requests) == (0, 0, 0, 4)
