"""Classification off the event loop (time cap, fail closed, counted), `POST /admin/classify`,
and audit rows that keep finding spans but never text -- through a real gateway on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys

import httpx
import pytest

from fairgate.gateway.request.classification import FAIL_CLOSED_METRIC, Classifier
from fairgate.gateway.settings import Settings
from tests.gateway.harness import ADMIN_TOKEN, Admin, GatewayThread
from tests.helpers.upstream import UpstreamServer

TCKN = "10000000146"


def _count(c: Classifier, reason: str) -> float:
    return c.fail_closed.labels(reason)._value.get()  # the counter's own value, no scrape


def test_timeout_and_errors_fail_closed_and_are_counted() -> None:
    c = Classifier(timeout_s=1e-9, workers=1, inline_chars=0)
    slow = ["1 " * 300_000]
    v = asyncio.run(c.assess(slow))
    assert v.sensitive and v.reasons == ("classification_timeout",) and _count(c, "timeout") == 1
    c.timeout_s = 30
    bad = asyncio.run(c.assess(["hello"], patterns=[r"(a)\1"]))  # RE2 refuses it: a detector error
    assert bad.sensitive and bad.reasons == ("classification_failed",) and _count(c, "error") == 1
    ok = asyncio.run(c.assess([f"kimlik {TCKN}"]))
    assert ok.sensitive and ok.kinds == ("tckn",) and ok.spans == (("tckn", 7, 18),)
    assert not asyncio.run(c.assess(["merhaba dünya"])).sensitive
    assert _count(c, "timeout") == 1 and _count(c, "error") == 1
    c.close()


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    db = tmp_path_factory.mktemp("classify") / "gw.db"
    settings = Settings(admin_token=ADMIN_TOKEN, database_url=f"sqlite:///{db}", embedded_engine=False,
                        upstream_max_retries=0)
    with contextlib.ExitStack() as es:
        local = es.enter_context(UpstreamServer())
        g = es.enter_context(GatewayThread(settings))
        admin = Admin(g.url)
        es.callback(admin.close)
        admin.backend("local-llm", local.base_url, kind="local", model="up-model")
        yield g, admin


def test_admin_classify_dry_run(gw) -> None:
    g, admin = gw
    text = "Hastamız Ayşe Demir HIV pozitif, kimlik 1\u200e0000\u2063000146, PRJ-1234"
    r = admin.client.post("/admin/classify", json={"text": text, "patterns": [r"PRJ-\d{4}"]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["sensitive"] and body["kinds"] == ["health", "pattern", "person_name", "tckn"]
    got = [(f["kind"], text[f["start"] : f["end"]]) for f in body["findings"]]
    # a special category's finding spans the sentence that says it (here the whole text)
    assert got == [("health", text), ("person_name", "Ayşe Demir"), ("tckn", "1\u200e0000\u2063000146"),
                   ("pattern", "PRJ-1234")]
    assert admin.client.post("/admin/classify", json={"text": "merhaba"}).json()["sensitive"] is False
    bad = admin.client.post("/admin/classify", json={"text": "x", "patterns": [r"(a)\1"]})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_pattern"
    assert admin.client.post("/admin/classify", json={"patterns": []}).status_code == 400
    anon = httpx.post(g.url + "/admin/classify", json={"text": TCKN}, timeout=10)
    assert anon.status_code == 401
    rows = admin.client.get("/admin/routing/audit").json()["data"]
    assert TCKN not in json.dumps(rows) and "Ayşe" not in json.dumps(rows)  # nothing stored


def test_tenant_detection_options_are_stored_and_honoured(gw) -> None:
    # issue 33's knobs: a name alone is personal unless the tenant turns strict names off; an
    # institution's call-centre line is not, unless the tenant counts institutional contacts
    _, admin = gw
    t = admin.tenant()
    url = f"/admin/tenants/{t['id']}/sensitivity"
    defaults = admin.client.get(url).json()
    assert (defaults["strict_names"], defaults["legal_person_data"], defaults["institutional_contacts"]) == (
        True, False, False)
    name_only = "Berfin Aydoğdu yarın sabah işe gelemeyecekmiş, vardiyasını kim alır?"
    call_centre = "Kargo firmasının çağrı merkezi 0850 222 44 55, hafta içi açık."

    def sensitive(text: str) -> bool:
        r = admin.client.post("/admin/classify", json={"text": text, "tenant_id": t["id"]})
        assert r.status_code == 200, r.text
        return r.json()["sensitive"]

    assert (sensitive(name_only), sensitive(call_centre)) == (True, False)
    put = admin.client.put(url, json={"patterns": [], "keywords": [], "strict_names": False,
                                      "institutional_contacts": True})
    assert put.status_code == 200, put.text
    assert (put.json()["strict_names"], put.json()["institutional_contacts"]) == (False, True)
    assert admin.client.get(url).json()["legal_person_data"] is False  # left out: the default
    assert (sensitive(name_only), sensitive(call_centre)) == (False, True)
    bad = admin.client.put(url, json={"patterns": [], "keywords": [], "strict_names": "no"})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "strict_names"


def test_backtracking_tenant_pattern_is_refused_at_save_time(gw) -> None:
    _, admin = gw
    t = admin.tenant()
    r = admin.client.put(f"/admin/tenants/{t['id']}/sensitivity", json={"patterns": [r"(\w)\1"], "keywords": []})
    assert r.status_code == 400 and "RE2" in r.json()["error"]["message"]
    ok = admin.client.put(f"/admin/tenants/{t['id']}/sensitivity",
                          json={"patterns": [r"(\w+\s?)+@corp\.example"], "keywords": []})
    assert ok.status_code == 200, ok.text


def test_audit_row_keeps_kinds_and_spans_never_text(gw) -> None:
    g, admin = gw
    t = admin.tenant()
    key = admin.key(t["id"])["key"]
    text = f"kimliğim {TCKN} ve kartım 4111 1111 1111 1111"
    r = httpx.post(g.url + "/v1/chat/completions", timeout=30, headers={"authorization": f"Bearer {key}"},
                   json={"model": "local-llm", "max_tokens": 2, "messages": [{"role": "user", "content": text}]})
    assert r.status_code == 200, r.text
    rows = admin.client.get("/admin/routing/audit", params={"tenant_id": t["id"]}).json()["data"]
    row = next(x for x in rows if x["request_id"] == r.headers["x-request-id"])
    assert row["finding_kinds"] == ["card", "tckn"]
    # offsets index the request's inspected strings joined by one character: "2" (max_tokens) first
    assert [tuple(s) for s in row["finding_spans"]] == [("tckn", 11, 22), ("card", 33, 52)]
    dump = json.dumps(rows)
    assert TCKN not in dump and "4111 1111" not in dump and "kimli" not in dump
    metrics = httpx.get(g.url + "/metrics", timeout=10, headers={"authorization": f"Bearer {ADMIN_TOKEN}"}).text
    assert FAIL_CLOSED_METRIC in metrics


def test_the_gateway_builds_the_detectors_at_start_and_freezes_them(tmp_path) -> None:
    """In a fresh process: the detectors' tables (name tagger, lexicons) are built while the app
    starts, not by its first request, and then frozen out of the collector's passes."""
    code = f"""
import asyncio, gc
from fairgate.gateway.app import create_app
from fairgate.gateway.settings import Settings
from fairgate.policies.detection.persons.lexicon import plain_words
from fairgate.policies.detection.persons.tagger import default_tagger

async def main():
    app = create_app(Settings(database_url="sqlite:///{tmp_path}/gw.db", embedded_engine=False))
    before = default_tagger.cache_info().currsize, plain_words.cache_info().currsize
    async with app.router.lifespan_context(app):
        after = default_tagger.cache_info().currsize, plain_words.cache_info().currsize
        tagger = default_tagger()
        collected = any(o is tagger for o in gc.get_objects())
    print(before, after, gc.is_tracked(tagger), collected)

asyncio.run(main())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split("\n")[-2] == "(0, 0) (1, 1) True False", out.stdout + out.stderr
