"""Router.decide over real backend objects (never called): classification, the invariant on the
Backend objects' own locality, fail-closed paths, and what reaches the audit writer."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import select

from fairgate.backends.openai_compat import OpenAICompatBackend
from fairgate.gateway.observability.routing_audit import RoutingAuditWriter
from fairgate.gateway.request.routing import NoRouteError, Router, RouteRequest, TenantDetectors
from fairgate.gateway.store.db import make_engine, upgrade
from fairgate.gateway.store.routing_tables import RoutingAudit
from fairgate.policies.routing import Rule, RuleMatch


@pytest.fixture
def backends():
    client = httpx.AsyncClient()
    out = {
        "loc": OpenAICompatBackend("loc", "http://127.0.0.1:9/v1", client, is_local=True),
        "ext": OpenAICompatBackend("ext", "http://127.0.0.1:9/v1", client, is_local=False),
    }
    yield out


def req(text: str, **kw: object) -> RouteRequest:
    base: dict[str, object] = {"tenant_id": "t1", "tenant_name": "acme", "model": "chat",
                               "priority": "standard", "texts": [text]}
    base.update(kw)
    return RouteRequest(**base)  # type: ignore[arg-type]


RULES = [Rule("pii", RuleMatch(sensitivity="sensitive"), "loc"),
         Rule("pub", RuleMatch(sensitivity="public"), "ext", ("loc",))]


async def test_decide_routes_by_sensitivity(backends) -> None:
    r = Router(backends, rules=RULES)
    d = await r.decide(req("hello"))
    assert [b.name for b in d.backends] == ["ext", "loc"] and not d.sensitive and d.rule_id == "pub"
    d = await r.decide(req("IBAN TR33 0006 1005 1978 6457 8413 26"))
    assert [b.name for b in d.backends] == ["loc"] and d.sensitive and d.finding_kinds == ["iban"]
    assert d.reason == "rule:pii;detector"


async def test_body_is_classified_not_only_texts(backends) -> None:
    r = Router(backends, rules=RULES)
    body = {"model": "chat", "messages": [{"role": "user", "content": "hi"}], "user": "ali@firma.com"}
    assert (await r.decide(req("hi", body=body))).sensitive
    image = {"model": "chat", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://example.org/x.png"}}]}]}
    d = await r.decide(req("", body=image))
    assert d.sensitive and "uninspectable_content" in d.reason


async def test_fail_closed_paths(backends) -> None:
    r = Router(backends, rules=RULES, tenants={"t1": TenantDetectors(patterns=("(broken",))})
    d = await r.decide(req("hello"))
    assert d.sensitive and "classification_failed" in d.reason and [b.name for b in d.backends] == ["loc"]
    closed = Router(backends, rules=RULES, fail_closed=True)
    assert (await closed.decide(req("hello"))).sensitive
    only_ext = Router({"ext": backends["ext"]}, rules=[Rule("pub", RuleMatch(sensitivity="public"), "ext")])
    with pytest.raises(NoRouteError) as exc:
        await only_ext.decide(req("hello", data_residency="local_only"))
    assert exc.value.status == 503 and exc.value.code == "no_local_backend"
    with pytest.raises(NoRouteError) as exc:
        await only_ext.decide(req("hello", classification_header="secret"))
    assert exc.value.status == 400


async def test_seam_compatible_constructor_and_aliases(backends) -> None:
    r = Router(backends, {"fast": "ext"})
    assert [b.name for b in (await r.decide(req("hi", model="fast"))).backends] == ["ext"]
    with pytest.raises(NoRouteError) as exc:
        await r.decide(req("kimlik 10000000146", model="fast"))
    assert exc.value.code == "no_local_backend"
    with pytest.raises(NoRouteError) as exc:
        await r.decide(req("hi", model="nope"))
    assert exc.value.status == 404


async def test_audit_rows_written_without_prompt_text(tmp_path, backends) -> None:
    url = f"sqlite:///{tmp_path}/a.db"
    upgrade(url)
    engine = make_engine(url)
    writer = RoutingAuditWriter(engine)
    r = Router(backends, rules=RULES, audit=writer)
    await r.decide(req("kart 4111 1111 1111 1111", request_id="req-1"))
    with pytest.raises(NoRouteError):
        await Router({"ext": backends["ext"]}, audit=writer).decide(req("x", model="ext", data_residency="local_only",
                                                                   request_id="req-2"))
    await writer.flush()  # inside a loop the writer batches: write what is queued now
    with engine.connect() as conn:
        rows = {row.request_id: row for row in conn.execute(select(RoutingAudit))}
    assert rows["req-1"].finding_kinds == ["card"] and rows["req-1"].backends == ["loc"]
    assert rows["req-1"].status == 200 and rows["req-1"].rule_id == "pii"
    assert rows["req-2"].status == 503 and rows["req-2"].decision == "no_local_backend"
    assert rows["req-2"].reasons == ["tenant:local_only"]
    stored = str([tuple(r) for r in rows.values()])  # timestamps may hold any 4 digits: check it all
    assert "4111 1111 1111 1111" not in stored and "kart" not in stored
    engine.dispose()
