"""An engine server SIGKILLed in the middle of a stream, behind a gateway pool: the client gets
the chunks so far, an in-band error and `[DONE]`; one usage row bills the exact prompt and what
was sent; the reservation is settled; the pool marks the replica down, then up once the engine
is back on its port, and the next request is served."""

from __future__ import annotations

import threading
import time

import httpx
import orjson
import pytest

from tests.faults.engines import LONG, engine_stats, wait_until
from tests.faults.figures import Figures
from tests.faults.stack import stack
from tests.faults.test_disconnects import ENGINE_ARGS, ENGINE_KEY
from tests.gateway.harness import free_port
from tests.helpers.engine_proc import EngineProcess


def _ready(url: str) -> int:
    return httpx.get(url + "/health/readiness", timeout=10).status_code


@pytest.mark.timeout(900)  # two engine starts: seconds on a quiet machine, minutes on a loaded one
def test_engine_sigkilled_mid_stream(upstream, tmp_path, long_model_dir, fault_report):
    port = free_port()
    engine = EngineProcess(long_model_dir, *ENGINE_ARGS, port=port).start()
    try:
        with stack(upstream, tmp_path) as s:
            r = s.admin.client.post("/admin/pools", json={
                "name": "eng", "kind": "local", "model": "tiny", "api_key": ENGINE_KEY,
                "replicas": [{"name": "r0", "base_url": engine.url + "/v1"}]})
            assert r.status_code == 201, r.text
            pool = s.gw.state.backends["eng"]
            pool.options.probe_interval_s = 0.2
            tenant, key = s.tenant_key(max_concurrent=2)
            h = {"authorization": f"Bearer {key}"}
            body = {"model": "eng", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": LONG,
                    "temperature": 0, "ignore_eos": True, "stream": True}
            prompt = httpx.post(s.gw.url + "/v1/chat/completions", headers=h, timeout=60,
                                json={**body, "stream": False, "max_tokens": 1}).json()["usage"]["prompt_tokens"]
            kv_before = engine_stats(engine.url)["kv_blocks_used"]
            events: list[dict] = []
            killer = threading.Thread(target=lambda: (wait_until(lambda: len(events) >= 10), engine.proc.kill()),
                                      daemon=True)
            killer.start()
            with httpx.stream("POST", s.gw.url + "/v1/chat/completions", headers=h, json=body, timeout=60) as resp:
                lines = []
                for line in resp.iter_lines():
                    lines.append(line)
                    if line.startswith("data: {"):
                        events.append(orjson.loads(line[6:]))
            killed_at = time.monotonic()
            killer.join(10)
            assert resp.status_code == 200 and [x for x in lines if x][-1] == "data: [DONE]"
            assert "error" in events[-1] and events[-1]["error"]["type"] == "server_error"
            sent = sum(1 for e in events if e.get("choices") and e["choices"][0]["delta"].get("content"))
            wait_until(lambda: not pool.replicas["r0"].healthy, 10)
            down_ready = _ready(s.gw.url)
            engine.proc.wait()
            engine = EngineProcess(long_model_dir, *ENGINE_ARGS, port=port).start()
            wait_until(lambda: pool.replicas["r0"].healthy, 30)
            recover_s = round(time.monotonic() - killed_at, 2)
            up_ready = _ready(s.gw.url)
            again = httpx.post(s.gw.url + "/v1/chat/completions", headers=h, timeout=60,
                               json={**body, "stream": False, "max_tokens": 3})
            s.settle_writers()
            rows = s.usage_rows(tenant)
            fig = fault_report(Figures(
                "engine SIGKILLed mid-stream", served=2, refused=1, rows_written=rows, rows_lost=3 - rows,
                leaked=s.leaked(tenant), kv_before=kv_before, kv_after=engine_stats(engine.url)["kv_blocks_used"],
                recover_s=recover_s, statuses={"sent_before_kill": sent, "readiness_down": down_ready,
                                               "readiness_up": up_ready}))
            cut = _cut_row(s, tenant)
            assert (fig.rows_lost, fig.leaked, fig.kv_after) == (0, 0, 0)
            assert (down_ready, up_ready, again.status_code) == (503, 200, 200)
            assert (cut.status, cut.http_status, cut.usage_estimated, cut.prompt_tokens) == ("failed", 502, False,
                                                                                             prompt)
            assert sent <= cut.completion_tokens < LONG
    finally:
        engine.stop()


def _cut_row(s, tenant):  # type: ignore[no-untyped-def]
    from sqlalchemy import select

    from fairgate.gateway.store.tables import UsageRecord

    with s.gw.state.sessions() as db:
        return db.scalars(select(UsageRecord).where(UsageRecord.tenant_id == tenant,
                                                    UsageRecord.status != "finished")).one()
