"""The OpenAI POST endpoints reached without Starlette's layers (gateway/fast_lane.py) keep
the front door's checks: header limits and one Authorization header, as for every other
route; other methods and paths take the router as before. Run as ASGI (no uvicorn parser in
front), so the app's own checks are what answers."""

from __future__ import annotations

import httpx

from fairgate.gateway.app import create_app
from fairgate.gateway.fast_lane import GatewayApp, direct_endpoints
from fairgate.gateway.settings import Settings

CHAT = {"model": "nope", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


def test_the_direct_endpoints_are_the_raw_post_routes() -> None:
    app = create_app(Settings(database_url="sqlite://", embedded_engine=False))
    assert isinstance(app, GatewayApp)
    assert set(direct_endpoints(app.router.routes)) == {
        "/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/embeddings"}


async def test_header_checks_and_routing_hold_on_the_direct_way(tmp_path) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/gw.db", admin_token="adm", embedded_engine=False,
                        max_header_count=20)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            two = [("authorization", "Bearer a"), ("authorization", "Bearer b")]
            r = await client.post("/v1/chat/completions", json=CHAT, headers=two)
            assert r.status_code == 400 and r.json()["error"]["code"] == "duplicate_authorization"
            many = {f"x-h{i}": "v" for i in range(30)}
            r = await client.post("/v1/embeddings", json=CHAT, headers=many)
            assert r.status_code == 431 and r.json()["error"]["code"] == "request_header_fields_too_large"
            r = await client.post("/v1/chat/completions", json=CHAT, headers={"authorization": "Bearer fg-wrong"})
            assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"  # the endpoint answered
            r = await client.get("/v1/chat/completions")
            assert r.status_code == 405  # not POST: the router, as before
            r = await client.post("/v1/chat/completions/", json=CHAT)
            assert r.status_code in (307, 404)  # another path: the router's answer
