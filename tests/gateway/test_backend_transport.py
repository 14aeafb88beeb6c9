"""A backend's transport settings through the gateway: admin create / read / patch (secrets
never echoed, stored encrypted), refusals with a 400 naming the field, Azure OpenAI's shape
end to end, a huge upstream answer as a clean OpenAI 502 with its usage row, and the
declarative file (applied once, exported without secrets)."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest
import yaml
from sqlalchemy import select, text

from fairgate.gateway.config.apply import apply_config
from fairgate.gateway.config.declarative import parse
from fairgate.gateway.config.export import export_config
from fairgate.gateway.settings import Settings
from fairgate.gateway.store.db import make_engine, make_sessionmaker, upgrade
from fairgate.gateway.store.secret_box import box_from_settings
from fairgate.gateway.store.tables import UsageRecord
from tests.helpers.forward_proxy import ForwardProxy

TRANSPORT = {"proxy_url": "http://fg:pr0xy-pass@127.0.0.1:3128", "tls_verify": False, "ca_bundle": "/etc/ca.pem",
             "extra_headers": {"X-Org": "org-secret-value"}, "extra_query": {"api-version": "2024-06-01"},
             "auth_header": "api-key", "max_response_bytes": 4096}


def _chat(gw, key: str, model: str, stream: bool = False) -> httpx.Response:  # type: ignore[no-untyped-def]
    return httpx.post(gw.url + "/v1/chat/completions", headers={"authorization": f"Bearer {key}"}, timeout=30,
                      json={"model": model, "messages": [{"role": "user", "content": "x"}], "stream": stream})


def test_transport_fields_are_stored_read_and_patched_without_showing_secrets(make_gateway):
    gw, admin = make_gateway()
    created = admin.backend("az", "https://x.example/openai/deployments/d", api_key="k", **TRANSPORT)
    one = admin.client.get("/admin/backends/az").json()
    assert one == created
    assert one["proxy_url"] == "http://fg:***@127.0.0.1:3128" and one["extra_header_names"] == ["X-Org"]
    assert (one["tls_verify"], one["auth_header"], one["max_response_bytes"]) == (False, "api-key", 4096)
    shown = admin.client.get("/admin/backends").text + admin.client.get("/admin/audit").text
    assert "pr0xy-pass" not in shown and "org-secret-value" not in shown
    with gw.state.sessions() as s:  # at rest: Fernet tokens, not the values
        raw = s.execute(text("SELECT proxy_url, extra_headers FROM backends WHERE name = 'az'")).one()
    assert all(v.startswith("fernet:") for v in raw) and "org-secret-value" not in raw[1]
    patched = admin.client.patch("/admin/backends/az", json={"proxy_url": None, "tls_verify": True,
                                                             "extra_query": {"a": "b"}}).json()
    assert (patched["proxy_url"], patched["tls_verify"], patched["extra_query"]) == (None, True, {"a": "b"})
    assert patched["extra_header_names"] == ["X-Org"] and patched["auth_header"] == "api-key"
    assert admin.client.get("/admin/backends/nope").status_code == 404


@pytest.mark.parametrize("field, value", [
    ("extra_headers", {"X-A": "v\r\nInjected: 1"}), ("extra_headers", {"Host": "evil"}),
    ("extra_headers", {"Content-Length": "0"}), ("extra_headers", {"bad name": "v"}),
    ("auth_header", "Content-Length"), ("auth_header", "api key"), ("proxy_url", "socks5://127.0.0.1:1080"),
    ("client_key", "/k.pem"), ("max_response_bytes", 0)])
def test_bad_transport_fields_are_a_400_naming_the_field(make_gateway, field, value):
    gw, admin = make_gateway()
    r = admin.client.post("/admin/backends", json={"name": "b", "base_url": "http://127.0.0.1:9/v1", field: value})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert field in f"{err.get('param')} {err['message']}"
    r = admin.client.patch("/admin/backends/up", json={field: value})
    assert r.status_code == 400, r.text


def test_a_backends_name_cannot_be_patched(make_gateway):
    gw, admin = make_gateway()
    r = admin.client.patch("/admin/backends/up", json={"name": "other"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "name"


def test_azure_openai_shape_through_the_gateway(make_gateway, upstream):
    gw, admin = make_gateway()
    base = upstream.base_url.replace("/v1", "/openai/deployments/d") + "?api-version=2024-06-01"
    admin.backend("azure", base, api_key="az-key", auth_header="api-key", extra_headers={"X-Org": "fg"})
    t = admin.tenant()
    key = admin.key(t["id"])["key"]
    for stream in (False, True):
        r = _chat(gw, key, "azure", stream)
        assert r.status_code == 200, r.text
        h = upstream.app.headers[-1]
        assert (h["api-key"], h["x-org"], "authorization" in h) == ("az-key", "fg", False)
        assert upstream.app.queries[-1] == b"api-version=2024-06-01"
        assert upstream.app.paths[-1] == "/openai/deployments/d/chat/completions"


def test_a_backends_proxy_carries_its_calls(make_gateway, upstream):
    gw, admin = make_gateway()
    with ForwardProxy(auth=("fg", "pw")) as proxy:
        admin.backend("proxied", upstream.base_url, proxy_url=f"http://fg:pw@127.0.0.1:{proxy.port}")
        t = admin.tenant()
        r = _chat(gw, admin.key(t["id"])["key"], "proxied")
        assert r.status_code == 200, r.text
        assert [(x.method, x.target) for x in proxy.seen] == [("POST", f"{upstream.base_url}/chat/completions")]


class Huge:
    """An upstream whose answer never ends: a 200 and chunk after chunk (one endless line)."""

    def __init__(self) -> None:
        self.sent = 0
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
            self.base_url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/v1"
            ready.set()
            self._loop.run_forever()

        threading.Thread(target=run, daemon=True).start()
        ready.wait(10)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        piece = b"x" * 65536
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
                         b"6\r\ndata: \r\n")
            while self.sent < 2**30:
                writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.sent += len(piece)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        writer.close()

    def stop(self) -> None:
        async def shutdown() -> None:
            self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)


def test_a_huge_upstream_answer_is_a_clean_502_and_recorded(make_gateway):
    huge = Huge()
    gw, admin = make_gateway()
    admin.backend("huge", huge.base_url, model="m", max_response_bytes=2**20)
    t = admin.tenant()
    key = admin.key(t["id"])["key"]
    r = _chat(gw, key, "huge")
    assert r.status_code == 502 and r.json()["error"]["code"] == "upstream_response_too_large"
    assert r.json()["error"]["type"] == "server_error" and "max_response_bytes" in r.json()["error"]["message"]
    s = _chat(gw, key, "huge", stream=True)
    errors = [line for line in s.text.split("\n") if "upstream_response_too_large" in line]
    assert s.status_code in (200, 502) and errors
    deadline = asyncio.run(_settle(gw))
    with gw.state.sessions() as db:
        rows = list(db.scalars(select(UsageRecord).where(UsageRecord.tenant_id == t["id"])))
    assert deadline and sorted((row.stream, row.status, row.http_status) for row in rows) == [
        (False, "failed", 502), (True, "failed", s.status_code if s.status_code != 200 else 502)]
    assert huge.sent < 64 * 2**20  # the gateway hung up near the cap, not after a gigabyte
    huge.stop()


async def _settle(gw, timeout: float = 10) -> bool:  # type: ignore[no-untyped-def]
    for _ in range(int(timeout / 0.05)):
        if gw.state.usage.written >= 2:
            return True
        await asyncio.sleep(0.05)
    return False


DECLARED = """
backends:
  - name: az
    base_url: https://x.example/openai/deployments/d?api-version=2024-06-01
    api_key: k
    auth_header: api-key
    proxy_url: http://u:s3cret@127.0.0.1:3128
    extra_headers: {X-Org: org-secret-value}
    extra_query: {trace: "1"}
    max_response_bytes: 1048576
    tls_verify: false
"""


def test_declared_transport_applies_once_and_exports_without_secrets(tmp_path):
    url = f"sqlite:///{tmp_path}/decl.db"
    box = box_from_settings(Settings())
    upgrade(url, secrets=box)
    sessions = make_sessionmaker(make_engine(url, box))
    config = parse(yaml.safe_load(DECLARED)).config
    with sessions.begin() as s:
        assert apply_config(s, config) == ["created backend az"]
    with sessions.begin() as s:
        assert apply_config(s, config) == []
    with sessions() as s:
        data, env = export_config(s)
    (az,) = data["backends"]
    dumped = yaml.safe_dump(data)
    assert "s3cret" not in dumped and "org-secret-value" not in dumped
    assert az["extra_headers"]["X-Org"].startswith("${ENV:FAIRGATE_SECRET_AZ_HEADER_X_ORG")
    assert az["proxy_url"].startswith("${ENV:") and az["extra_query"] == {"trace": "1"}
    assert len(env) == 3 and az["auth_header"] == "api-key" and az["tls_verify"] is False
