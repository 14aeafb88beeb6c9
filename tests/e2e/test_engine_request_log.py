"""`fairgate engine --log-requests` (issue 37): one info line per finished request, naming the
request, the tenant the gateway sent, tokens and times; never the prompt or the output. Off by
default."""

from __future__ import annotations

import re

import httpx

from tests.helpers.engine_proc import EngineProcess

PROMPT = "the quarterly numbers of project kingfisher"


def _lines_after(engine: EngineProcess, key: str, tenant: str) -> list[str]:
    r = httpx.post(engine.url + "/v1/completions", timeout=60,
                   headers={"authorization": f"Bearer {key}", "x-tenant": tenant, "x-request-id": "log-probe-1"},
                   json={"model": "tiny", "prompt": PROMPT, "max_tokens": 5, "temperature": 0, "ignore_eos": True})
    assert r.status_code == 200, r.text
    assert engine.proc is not None and engine.proc.stdout is not None
    engine.proc.terminate()
    engine.proc.wait(timeout=30)
    return [*engine.output, *engine.proc.stdout.read().splitlines()]


def test_the_engine_logs_one_line_per_request_when_asked(tiny_model_dir):
    engine = EngineProcess(tiny_model_dir, "--api-key", "k", "--log-requests").start()
    try:
        out = _lines_after(engine, "k", "acme")
        text = "\n".join(out)
    finally:
        engine.stop()
    lines = [x for x in out if "fairgate.engine.requests" in x]
    assert len(lines) == 1, lines
    line = lines[0]
    assert "tenant=acme" in line and "prompt_tokens=" in line and "completion_tokens=5" in line
    assert re.search(r"ttft_ms=\d+\.\d", line) and re.search(r"latency_ms=\d+\.\d", line)
    assert "kingfisher" not in text  # no prompt text anywhere in the log


def test_no_request_lines_by_default(tiny_model_dir):
    engine = EngineProcess(tiny_model_dir, "--api-key", "k").start()
    try:
        out = _lines_after(engine, "k", "acme")
    finally:
        engine.stop()
    assert not [x for x in out if "fairgate.engine.requests" in x]
