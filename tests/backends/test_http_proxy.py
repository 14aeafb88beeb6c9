"""Proxies, ours (backends/http_proxy.py through HTTP1Pool) against httpx's: the same exchange
through a real forward proxy on loopback (tests/helpers/forward_proxy.py) from both clients,
comparing what the proxy saw; and httpx's own choice of proxy per URL for NO_PROXY's rules."""

from __future__ import annotations

import asyncio
import base64
import ssl

import httpx
import pytest

from fairgate.backends.http1 import HTTP1Pool, HTTPError
from fairgate.backends.http_proxy import proxy_for
from fairgate.backends.http_tls import TLSSettings
from fairgate.backends.http_transport import Transport, header_block, origin_for
from tests.helpers.forward_proxy import ForwardProxy
from tests.helpers.tls_certs import make_pki
from tests.helpers.upstream import UpstreamServer

BODY = b'{"model":"m","messages":[{"role":"user","content":"a b"}],"max_tokens":2}'
PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def up():
    with UpstreamServer() as server:
        yield server


@pytest.fixture(scope="module")
def tls_up(pki):
    with UpstreamServer(tls={"ssl_certfile": pki.server_cert, "ssl_keyfile": pki.server_key}) as server:
        yield server


async def ours(base: str, transport: Transport | None = None) -> tuple[int, bytes]:
    t = transport or Transport()
    pool = HTTP1Pool()
    try:
        resp = await pool.post(origin_for(base, t), "/chat/completions", header_block(None, t), BODY, 5)
        return resp.status, await resp.read()
    finally:
        await pool.aclose()


async def library(base: str, **client: object) -> tuple[int, bytes]:
    async with httpx.AsyncClient(timeout=5, **client) as c:  # type: ignore[arg-type]
        r = await c.post(base + "/chat/completions", content=BODY, headers={"content-type": "application/json"})
        return r.status_code, r.content


def both(base: str, transport: Transport | None = None, **client: object) -> tuple[tuple, tuple]:
    return asyncio.run(ours(base, transport)), asyncio.run(library(base, **client))


def _ca_context(pki) -> ssl.SSLContext:  # type: ignore[no-untyped-def]
    return ssl.create_default_context(cafile=pki.ca)


def test_http_proxy_from_the_environment_gets_absolute_form_requests_like_httpx(up, monkeypatch):
    with ForwardProxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        (s1, b1), (s2, b2) = both(up.base_url)
        assert s1 == s2 == 200 and b'"content":"w0 w1"' in b1 and b'"content":"w0 w1"' in b2
        assert [(x.method, x.target, x.headers["host"]) for x in proxy.seen] == [
            ("POST", f"{up.base_url}/chat/completions", f"127.0.0.1:{up.port}")] * 2


def test_all_proxy_is_the_fallback_for_both_schemes(up, monkeypatch):
    with ForwardProxy() as proxy:
        monkeypatch.setenv("ALL_PROXY", proxy.url)
        (s1, _), (s2, _) = both(up.base_url)
        assert s1 == s2 == 200 and len(proxy.seen) == 2


def test_https_proxy_tunnels_with_connect_then_tls_like_httpx(tls_up, pki, monkeypatch):
    with ForwardProxy() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # never used for an https:// upstream
        t = Transport(tls=TLSSettings(ca_bundle=pki.ca))
        (s1, b1), (s2, b2) = both(tls_up.base_url, t, verify=_ca_context(pki))
        assert s1 == s2 == 200 and b'"chat.completion"' in b1 and b'"chat.completion"' in b2
        assert [(x.method, x.target) for x in proxy.seen] == [("CONNECT", f"127.0.0.1:{tls_up.port}")] * 2


@pytest.mark.parametrize("no_proxy, proxied", [("127.0.0.1", False), ("*", False), ("localhost,127.0.0.1", False),
                                               ("127.0.0.1:1", True), ("example.com", True)])
def test_no_proxy_decides_like_httpx(up, monkeypatch, no_proxy, proxied):
    with ForwardProxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", no_proxy)
        (s1, _), (s2, _) = both(up.base_url)
        assert s1 == s2 == 200
        assert len(proxy.seen) == (2 if proxied else 0)


NO_PROXY = "example.com,.internal.corp,localhost,10.1.2.3,::1,api.other.com:8443,http://plain.org"
URLS = ["http://example.com", "https://www.example.com", "https://notexample.com", "https://internal.corp",
        "https://x.internal.corp", "http://localhost:8000", "http://sub.localhost", "http://10.1.2.3",
        "http://10.1.2.4", "http://[::1]:8000", "https://api.other.com:8443", "https://api.other.com",
        "http://plain.org", "https://plain.org", "https://EXAMPLE.com"]


def test_proxy_choice_per_url_matches_httpx(monkeypatch):
    """httpx's own pick (its mounts, as trust_env builds them) for each URL, against ours."""
    monkeypatch.setenv("HTTP_PROXY", "http://p-http:1")
    monkeypatch.setenv("HTTPS_PROXY", "http://p-https:2")
    monkeypatch.setenv("NO_PROXY", NO_PROXY)
    client = httpx.AsyncClient()
    for url in URLS:
        u = httpx.URL(url)
        theirs = client._transport_for_url(u) is not client._transport
        mine = proxy_for(u.scheme, u.host, u.port or (443 if u.scheme == "https" else 80))
        assert (mine is not None) == theirs, url
        if mine is not None:
            assert mine.host == ("p-https" if u.scheme == "https" else "p-http"), url
    asyncio.run(client.aclose())


def test_networks_in_no_proxy_match_their_addresses(monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://p:1")
    monkeypatch.setenv("NO_PROXY", "10.0.0.0/8, fd00::/8")
    assert proxy_for("http", "10.200.3.4", 80) is None and proxy_for("http", "fd00::5", 80) is None
    assert proxy_for("http", "11.0.0.1", 80) is not None and proxy_for("http", "ten.example", 80) is not None


@pytest.mark.parametrize("tls", [False, True])
def test_proxy_credentials_from_the_url_like_httpx(up, tls_up, pki, tls):
    with ForwardProxy(auth=("us er", "p@ss:w")) as proxy:
        url = f"http://us%20er:p%40ss%3Aw@127.0.0.1:{proxy.port}"
        base = tls_up.base_url if tls else up.base_url
        t = Transport(proxy_url=url, tls=TLSSettings(ca_bundle=pki.ca))
        (s1, _), (s2, _) = both(base, t, proxy=url, verify=_ca_context(pki))
        assert s1 == s2 == 200
        want = "Basic " + base64.b64encode(b"us er:p@ss:w").decode()
        assert [x.headers.get("proxy-authorization") for x in proxy.seen] == [want, want]


def test_a_refused_tunnel_is_an_error_in_both(tls_up, pki):
    with ForwardProxy(auth=("u", "right")) as proxy:
        url = f"http://u:wrong@127.0.0.1:{proxy.port}"
        with pytest.raises(HTTPError) as mine:
            asyncio.run(ours(tls_up.base_url, Transport(proxy_url=url, tls=TLSSettings(ca_bundle=pki.ca))))
        assert "407" in str(mine.value) and "proxy" in str(mine.value) and mine.value.before_response
        with pytest.raises(httpx.ProxyError):
            asyncio.run(library(tls_up.base_url, proxy=url, verify=_ca_context(pki)))


def test_a_backends_proxy_url_overrides_the_environment(up, monkeypatch):
    with ForwardProxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        (s1, _), (s2, _) = both(up.base_url, Transport(proxy_url=proxy.url), proxy=proxy.url)
        assert s1 == s2 == 200 and len(proxy.seen) == 2


def test_an_unreachable_proxy_is_named(up):
    with pytest.raises(HTTPError) as exc:
        asyncio.run(ours(up.base_url, Transport(proxy_url="http://127.0.0.1:9")))
    assert "the proxy 127.0.0.1:9" in str(exc.value) and exc.value.before_response
