"""An engine server that hangs (SIGSTOP: its connections stay open, nothing answers) while a
sensitive request and a stream wait on it: the gateway notices within seconds, not at the
upstream timeout (set to 10 minutes here, past this test's own limit). The waiting request gets
the local path's 503 with Retry-After, the stream an in-band error and `[DONE]`; each leaves one
usage row and no reservation; once the engine runs again it frees every KV block and serves."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import httpx
import orjson
import pytest

from fairgate.gateway.settings import Settings
from fairgate.gateway.store.tables import UsageRecord
from tests.faults.engines import LONG, engine_stats, wait_drained, wait_until
from tests.faults.figures import Figures
from tests.faults.test_disconnects import ENGINE_ARGS, ENGINE_KEY
from tests.gateway.harness import ADMIN_TOKEN, REDIS_URL, Admin, GatewayThread, redis_prefix
from tests.helpers.engine_proc import EngineProcess
from tests.helpers.rows import count

UPSTREAM_TIMEOUT_S = 600.0


@pytest.mark.timeout(600)
def test_a_hung_engine_is_noticed_before_the_upstream_timeout(tmp_path, long_model_dir, fault_report):
    db = f"sqlite:///{tmp_path}/gw.db"
    with contextlib.ExitStack() as es:
        engine = es.enter_context(EngineProcess(long_model_dir, *ENGINE_ARGS))
        es.callback(lambda: os.kill(engine.proc.pid, signal.SIGCONT))  # never leave it stopped
        prefix = es.enter_context(redis_prefix())
        gw = es.enter_context(GatewayThread(Settings(
            admin_token=ADMIN_TOKEN, database_url=db, embedded_engine=False, redis_url=REDIS_URL,
            redis_prefix=prefix, usage_flush_interval_s=0.02, upstream_timeout_s=UPSTREAM_TIMEOUT_S)))
        admin = Admin(gw.url)
        es.callback(admin.close)
        admin.backend("eng", engine.url + "/v1", model="tiny", kind="local", api_key=ENGINE_KEY)
        tenant = admin.tenant()["id"]
        admin.quota(tenant, max_concurrent=4)
        key = admin.key(tenant)["key"]
        h = {"authorization": f"Bearer {key}", "x-data-classification": "sensitive"}
        body = {"model": "eng", "messages": [{"role": "user", "content": "merhaba"}], "max_tokens": LONG,
                "temperature": 0, "ignore_eos": True}
        answers: dict[str, object] = {}

        def whole() -> None:
            answers["whole"] = httpx.post(gw.url + "/v1/chat/completions", headers=h, json=body, timeout=700)

        def stream() -> None:
            lines = []
            with httpx.stream("POST", gw.url + "/v1/chat/completions", headers=h, json={**body, "stream": True},
                              timeout=700) as resp:
                for line in resp.iter_lines():
                    lines.append(line)
                    answers.setdefault("first_event", time.monotonic())
            answers["stream"] = (resp.status_code, [x for x in lines if x])

        threads = [threading.Thread(target=whole, daemon=True), threading.Thread(target=stream, daemon=True)]
        for t in threads:
            t.start()
        wait_until(lambda: engine_stats(engine.url)["running"] == 2 and "first_event" in answers, 120)
        os.kill(engine.proc.pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        for t in threads:
            t.join(UPSTREAM_TIMEOUT_S)
        noticed_s = round(time.monotonic() - stopped_at, 2)
        os.kill(engine.proc.pid, signal.SIGCONT)

        whole_resp = answers["whole"]
        assert isinstance(whole_resp, httpx.Response)
        err = whole_resp.json()["error"]
        assert (whole_resp.status_code, err["code"]) == (503, "local_backend_unavailable"), whole_resp.text
        assert "stopped answering" in err["message"] and whole_resp.headers["retry-after"] == "1"
        status, lines = answers["stream"]  # type: ignore[misc]
        assert status == 200 and lines[-1] == "data: [DONE]"
        last = orjson.loads(lines[-2][6:])
        assert "stopped answering" in last["error"]["message"]

        drained = wait_drained(engine.url, 60)  # running again, it notices both clients gone
        wait_until(lambda: count(db, UsageRecord, UsageRecord.tenant_id == tenant) == 2, 30)
        held = gw.call(gw.state.quota.counters(f"t:{tenant}"))["concurrent"]
        served = None
        for _ in range(40):  # the breaker counted two faults: it lets a probe through soon
            served = httpx.post(gw.url + "/v1/chat/completions", headers=h, timeout=120,
                                json={**body, "max_tokens": 3})
            if served.status_code == 200:
                break
            time.sleep(0.5)
        assert served is not None and served.status_code == 200, served.text
        fault_report(Figures(
            "engine hung (SIGSTOP), stream + request out", served=1, refused=2, rows_written=2, rows_lost=0,
            leaked=held, kv_before=0, kv_after=drained["kv_blocks_used"],
            statuses={"noticed_s": noticed_s, "upstream_timeout_s": UPSTREAM_TIMEOUT_S}))
        assert held == 0 and drained["kv_blocks_used"] == 0
