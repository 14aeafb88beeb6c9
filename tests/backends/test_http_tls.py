"""Per-backend TLS, ours (backends/http_tls.py through HTTP1Pool) against httpx's: a real TLS
upstream on loopback (uvicorn with a certificate from a CA made in the test), then one that
also requires a client certificate (mTLS)."""

from __future__ import annotations

import asyncio
import ssl

import httpx
import pytest

from fairgate.backends.base import BackendError, GenerationRequest
from fairgate.backends.http1 import HTTP1Pool, HTTPError
from fairgate.backends.http_tls import TLSSettings
from fairgate.backends.http_transport import Transport, header_block, origin_for
from fairgate.backends.openai_compat import OpenAICompatBackend
from tests.helpers.tls_certs import make_pki
from tests.helpers.upstream import UpstreamServer

BODY = b'{"model":"m","messages":[{"role":"user","content":"a"}],"max_tokens":1}'


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_up(pki):
    with UpstreamServer(tls={"ssl_certfile": pki.server_cert, "ssl_keyfile": pki.server_key}) as server:
        yield server


@pytest.fixture(scope="module")
def mtls_up(pki):
    with UpstreamServer(tls={"ssl_certfile": pki.server_cert, "ssl_keyfile": pki.server_key,
                             "ssl_ca_certs": pki.ca, "ssl_cert_reqs": ssl.CERT_REQUIRED}) as server:
        yield server


async def ours(base: str, tls: TLSSettings) -> int:
    t = Transport(tls=tls)
    pool = HTTP1Pool()
    try:
        resp = await pool.post(origin_for(base, t), "/chat/completions", header_block(None, t), BODY, 5)
        await resp.read()
        return resp.status
    finally:
        await pool.aclose()


async def library(base: str, verify: ssl.SSLContext | bool) -> int:
    async with httpx.AsyncClient(timeout=5, verify=verify) as c:
        r = await c.post(base + "/chat/completions", content=BODY, headers={"content-type": "application/json"})
        return r.status_code


def _context(cafile: str | None = None, cert: tuple[str, str] | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=cafile)
    if cert:
        ctx.load_cert_chain(*cert)
    return ctx


def test_an_unknown_ca_is_refused_by_default_with_a_clear_error_in_both(tls_up):
    with pytest.raises(HTTPError) as mine:
        asyncio.run(ours(tls_up.base_url, TLSSettings()))
    msg = str(mine.value)
    assert "not trusted" in msg and "ca_bundle" in msg and "tls_verify" in msg and mine.value.before_response
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        asyncio.run(library(tls_up.base_url, True))


def test_the_upstreams_ca_bundle_is_trusted_in_both(tls_up, pki):
    assert asyncio.run(ours(tls_up.base_url, TLSSettings(ca_bundle=pki.ca))) == 200
    assert asyncio.run(library(tls_up.base_url, _context(pki.ca))) == 200


def test_verify_off_accepts_it_in_both(tls_up):
    assert asyncio.run(ours(tls_up.base_url, TLSSettings(verify=False))) == 200
    assert asyncio.run(library(tls_up.base_url, False)) == 200


def test_mtls_refuses_without_a_client_certificate_in_both(mtls_up, pki):
    with pytest.raises(HTTPError) as mine:
        asyncio.run(ours(mtls_up.base_url, TLSSettings(ca_bundle=pki.ca)))
    assert "client_cert" in str(mine.value) and mine.value.before_response
    with pytest.raises(httpx.TransportError):
        asyncio.run(library(mtls_up.base_url, _context(pki.ca)))


def test_mtls_accepts_the_client_certificate_in_both(mtls_up, pki):
    tls = TLSSettings(ca_bundle=pki.ca, client_cert=pki.client_cert, client_key=pki.client_key)
    assert asyncio.run(ours(mtls_up.base_url, tls)) == 200
    assert asyncio.run(library(mtls_up.base_url, _context(pki.ca, (pki.client_cert, pki.client_key)))) == 200


def test_an_unreadable_ca_bundle_is_named_not_shown(tls_up, tmp_path):
    with pytest.raises(HTTPError) as exc:
        asyncio.run(ours(tls_up.base_url, TLSSettings(ca_bundle=str(tmp_path / "missing.pem"))))
    assert "ca_bundle" in str(exc.value) and "missing.pem" not in str(exc.value)


def test_a_backend_with_its_tls_settings_answers_and_one_without_is_a_clear_502(tls_up, pki):
    async def call(tls: TLSSettings) -> dict | BackendError:
        pool = HTTP1Pool()
        b = OpenAICompatBackend("tls", tls_up.base_url, pool, max_retries=0, transport=Transport(tls=tls))
        try:
            return await b.complete(GenerationRequest.from_body("r1", "chat", {"model": "m", "messages": [{"role": "user", "content": "x"}]}))
        except BackendError as exc:
            return exc
        finally:
            await pool.aclose()

    good = asyncio.run(call(TLSSettings(ca_bundle=pki.ca)))
    assert isinstance(good, dict) and good["object"] == "chat.completion"
    bad = asyncio.run(call(TLSSettings()))
    assert isinstance(bad, BackendError) and bad.status == 502 and "ca_bundle" in str(bad)
