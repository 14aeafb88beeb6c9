"""One info line per request, naming the request, tenant, route, backend, status, tokens and
latency; and across every logger at debug, neither the prompt nor the key ever shows up."""

from __future__ import annotations

import logging
import re

import httpx

from fairgate.gateway.billing.usage import UsageEvent
from fairgate.gateway.request.request_log import log_request

PROMPT = "the secret plan of the platform team is operation bluefin, do not tell"


def records_of(caplog, name: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == name]


def test_a_line_per_request_and_no_prompt_or_key_in_any_log(make_gateway, caplog):
    caplog.set_level(logging.DEBUG)  # every logger, every level: nothing may carry the secrets
    gw, admin = make_gateway()
    tenant = admin.tenant("log-team")
    key = admin.key(tenant["id"])["key"]
    body = {"model": "up", "max_tokens": 5, "messages": [{"role": "user", "content": PROMPT}]}
    h = {"authorization": f"Bearer {key}"}
    ok = httpx.post(gw.url + "/v1/chat/completions", json=body, headers=h, timeout=30)
    assert ok.status_code == 200
    with httpx.stream("POST", gw.url + "/v1/chat/completions", json=body | {"stream": True}, headers=h) as r:
        assert r.status_code == 200
        list(r.iter_lines())
    bad = httpx.post(gw.url + "/v1/chat/completions", json=body | {"model": "nope"}, headers=h, timeout=30)
    assert bad.status_code == 404
    wrong_key = httpx.post(gw.url + "/v1/chat/completions", json=body, headers={"authorization": "Bearer fg-wrong"})
    assert wrong_key.status_code == 401
    assert gw.call(gw.state.usage.flush())

    lines = [r.getMessage() for r in records_of(caplog, "fairgate.requests")]
    assert len(lines) == 4, lines  # two answered, two refused before admission
    usage = ok.json()["usage"]
    (first,) = [line for line in lines if line.startswith(f"request {ok.json()['id']} ")]
    for field in (f"tenant={tenant['id']}", "route=/v1/chat/completions", "backend=up", "status=finished",
                  "http=200", f"prompt_tokens={usage['prompt_tokens']}",
                  f"completion_tokens={usage['completion_tokens']}"):
        assert field in first, (field, first)
    assert re.search(r"latency_ms=\d+\.\d", first)
    assert any("stream=yes" in line and "ttft_ms=" in line and "ttft_ms=-" not in line for line in lines)
    refused = sorted(line for line in lines if line.startswith("request refused"))
    assert [re.sub(r"latency_ms=[\d.]+", "", line) for line in refused] == [
        "request refused tenant=- route=/v1/chat/completions http=401 code=invalid_api_key reason=auth ",
        f"request refused tenant={tenant['id']} route=/v1/chat/completions http=404 code=model_not_found "
        "reason=no_backend "]
    everything = "\n".join(r.getMessage() for r in caplog.records) + caplog.text
    for secret in (PROMPT, "bluefin", key, key[11:]):
        assert secret not in everything


def test_log_request_is_silent_above_info(caplog):
    caplog.set_level(logging.WARNING, logger="fairgate.requests")
    e = UsageEvent("r1", "t1", "fg-x", "m", "b", "standard", "finished", False, 3, 4, False, 0.0, 200, None, 1.5)
    log_request(e)
    assert records_of(caplog, "fairgate.requests") == []
    caplog.set_level(logging.INFO, logger="fairgate.requests")
    log_request(e)
    (line,) = [r.getMessage() for r in records_of(caplog, "fairgate.requests")]
    assert line.startswith("request r1 tenant=t1 route=- model=m backend=b") and "ttft_ms=-" in line


def test_log_level_is_one_of_the_names_in_any_case():
    import pytest
    from pydantic import ValidationError

    from fairgate.gateway.settings import Settings

    assert Settings().log_level == "info"  # a line per request unless turned down
    assert Settings(log_level="WARNING").log_level == "warning"
    with pytest.raises(ValidationError, match="log_level must be one of"):
        Settings(log_level="loud")
