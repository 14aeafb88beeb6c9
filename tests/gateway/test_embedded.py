"""The embedded default: an in-process engine on a model folder, listed under the folder name,
receiving tenant weights and serving tenants through the same request path."""

from __future__ import annotations

import httpx
import pytest

from tests.gateway.harness import embedded_gateway


def test_embedded_engine_serves_and_gets_weights(tmp_path, tiny_model_dir):
    with embedded_gateway(tmp_path, tiny_model_dir) as (gw, admin):
        name = tiny_model_dir.name
        t = admin.tenant(weight=3.0)
        key = admin.key(t["id"])["key"]
        h = {"authorization": f"Bearer {key}"}
        models = httpx.get(gw.url + "/v1/models", headers=h).json()["data"]
        assert [m["id"] for m in models] == [name]
        # issue 37: the context length, as the engine server and vLLM list it
        assert models[0]["max_model_len"] == gw.state.embedded.engine.max_model_len > 0
        one = httpx.get(gw.url + f"/v1/models/{name}", headers=h).json()
        assert one["max_model_len"] == models[0]["max_model_len"]
        engine = gw.state.embedded.engine
        assert engine.fairness_weights == {t["id"]: 3.0}
        admin.client.patch(f"/admin/tenants/{t['id']}", json={"weight": 0.5})
        assert engine.fairness_weights == {t["id"]: 0.5}
        r = httpx.post(gw.url + "/v1/chat/completions", headers=h, timeout=120, json={
            "model": name, "messages": [{"role": "user", "content": "merhaba"}], "max_tokens": 3,
            "temperature": 0})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["model"] == name and body["usage"]["completion_tokens"] <= 3
        # no max_tokens: the reserved default is kept inside the tiny model's context
        r = httpx.post(gw.url + "/v1/chat/completions", headers=h, timeout=120, json={
            "model": name, "messages": [{"role": "user", "content": "merhaba"}], "temperature": 0})
        assert r.status_code == 200, r.text


def test_embedded_engine_takes_the_new_fields_and_refuses_bad_ones(tmp_path, tiny_model_dir):
    import asyncio

    import openai

    with embedded_gateway(tmp_path, tiny_model_dir) as (gw, admin):
        name = tiny_model_dir.name
        t = admin.tenant()
        key = admin.key(t["id"])["key"]
        with openai.OpenAI(base_url=gw.url + "/v1", api_key=key, max_retries=0, timeout=120) as c:
            msgs = [{"role": "user", "content": "merhaba"}]
            for bad in ({"logit_bias": {"5": 500}}, {"top_logprobs": 30, "logprobs": True}, {"min_p": 2},
                        {"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "nope"}}}},
                        {"tools": [{"type": "function", "function": {"name": ""}}]}, {"n": 0}):
                with pytest.raises(openai.BadRequestError) as err:
                    c.chat.completions.create(model=name, messages=msgs, max_tokens=3, extra_body=bad)
                assert err.value.body["param"] == next(iter(bad)) or err.value.body["param"] == "top_logprobs"
            counters = asyncio.run_coroutine_threadsafe(gw.state.quota.counters(f"t:{t['id']}"), gw.server_loop)
            assert counters.result(10)["daily_tokens"] == 0  # every refusal released what it held
            r = c.chat.completions.create(model=name, messages=msgs, max_tokens=3, n=2, logprobs=True,
                                          top_logprobs=2, seed=1)
            assert [ch.index for ch in r.choices] == [0, 1] and r.usage.completion_tokens == 6
            assert all(len(ch.logprobs.content) == 3 for ch in r.choices)
            js = c.chat.completions.create(model=name, messages=msgs, max_tokens=40, seed=2, response_format={
                "type": "json_schema", "json_schema": {"name": "s", "schema": {
                    "type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
                    "additionalProperties": False}}})
            assert js.choices[0].message.content in ('{"ok": true}', '{"ok": false}')


def test_token_id_prompts_stay_with_the_engine_whose_tokenizer_they_are_for(tmp_path, tiny_model_dir):
    """Token ids mean what the receiving model's tokenizer says (issue 35): ids for a public rule
    whose backend is an external API, which offers no tokenizer, are unreadable and stay on the
    embedded engine however harmless they read with its tokenizer; ids of a TC kimlik number
    stay there too, and ids outside its vocabulary never leave (the engine refuses them)."""
    import openai

    from fairgate.backends.local.model.tokenizer import Tokenizer
    from tests.helpers.upstream import UpstreamServer

    with UpstreamServer() as ext, embedded_gateway(tmp_path, tiny_model_dir, upstream_max_retries=0) as (gw, admin):
        admin.backend("ext", ext.base_url, kind="openai", model="up-model")
        rules = [{"match": {"model": "m", "sensitivity": "sensitive"}, "backend": gw.state.embedded.name},
                 {"match": {"model": "m", "sensitivity": "public"}, "backend": "ext"}]
        admin.routes(rules)
        key = admin.key(admin.tenant()["id"])["key"]
        tok = Tokenizer(tiny_model_dir)
        with openai.OpenAI(base_url=gw.url + "/v1", api_key=key, max_retries=0, timeout=120) as c:
            harmless = tok.encode("Toplantı yarın saat onda.")
            assert c.completions.create(model="m", prompt=harmless, max_tokens=2).usage.prompt_tokens == len(harmless)
            assert ext.received == []
            local = c.completions.create(model="m", prompt=[tok.encode("TC kimlik 10000000146 kayıtlı")],
                                         max_tokens=2, temperature=0)
            assert local.usage.completion_tokens <= 2  # the embedded engine answered
            with pytest.raises(openai.BadRequestError):
                c.completions.create(model="m", prompt=[*harmless, tok.vocab_size + 3], max_tokens=2)
        assert ext.received == []
