"""A small recorded load for dashboard tests: two tenants (one with quotas) calling a real
gateway with its embedded tiny engine, streamed and not, with a shared system prompt, and one
request of the second tenant refused (over the context)."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from tests.gateway.harness import Admin

SYSTEM = "You are the release notes assistant of the platform team; answer in one short line. " * 2
SECRET_PROMPT = "tell me about the migration of ledger-7781 to cluster zeta"


@dataclass(slots=True)
class Load:
    tenant_a: dict
    tenant_b: dict
    key_a: str
    key_b: str
    model: str


def chat(url: str, key: str, model: str, stream: bool, user: str = SECRET_PROMPT) -> None:
    body = {"model": model, "max_tokens": 6, "temperature": 0, "ignore_eos": True, "stream": stream,
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]}
    h = {"authorization": f"Bearer {key}", "x-prompt-version": "notes-v1"}
    if stream:
        with httpx.stream("POST", url + "/v1/chat/completions", json=body, headers=h, timeout=120) as r:
            assert r.status_code == 200
            for _ in r.iter_lines():
                pass
    else:
        r = httpx.post(url + "/v1/chat/completions", json=body, headers=h, timeout=120)
        assert r.status_code == 200, r.text


def refused(url: str, key: str, model: str) -> None:
    """A prompt over the tiny model's 512-token context: admitted, then refused with a 400 (its
    usage row has no backend), so it must stay out of every latency figure."""
    body = {"model": model, "max_tokens": 4, "messages": [{"role": "user", "content": "word " * 3000}]}
    r = httpx.post(url + "/v1/chat/completions", json=body, headers={"authorization": f"Bearer {key}"}, timeout=60)
    assert r.status_code == 400 and "context length" in r.text, r.text


def run_load(url: str, admin: Admin, model: str) -> Load:
    a = admin.tenant("docs-team")
    b = admin.tenant("billing-team")
    admin.quota(a["id"], daily_tokens=5000, monthly_tokens=100000)
    ka, kb = admin.key(a["id"])["key"], admin.key(b["id"])["key"]
    for i in range(3):
        chat(url, ka, model, stream=i != 1)
    chat(url, kb, model, stream=True)
    refused(url, kb, model)
    return Load(a, b, ka, kb, model)
