"""KVKK routing of token-id inputs, through a real gateway (uvicorn, SQLite) to recording servers on
loopback, driven by the openai SDK: a completions `prompt` or embeddings `input` given as token ids
is read back to text with the tokenizer of each backend it may be sent to (a pool's `tokenizer`
folder) and classified like text. Ids mean what the receiving model's tokenizer says, so ids for
a backend that offers no tokenizer (an external API: cl100k ids of a TCKN read as harmless words
with ours) are unreadable. As a property: ids encoding a TC kimlik number, a TR IBAN or a +90
phone (however they are split into tokens, alone or in a batch) never reach the external
upstream. Ids nobody here can read (no tokenizer, outside the vocabulary) fail closed: local only,
or a 503 when the model has no local route."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fairgate.backends.local.model.tokenizer import Tokenizer
from fairgate.policies.sensitivity import classify_parts
from tests.gateway.harness import routing_gateway
from tests.helpers.pii_corpus import fmt_iban, make_iban, make_phone, make_tckn
from tests.helpers.upstream import UpstreamServer


@pytest.fixture(scope="module")
def world(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    db = f"sqlite:///{tmp_path_factory.mktemp('token-ids') / 'gw.db'}"
    with contextlib.ExitStack() as es:
        local, bare, ext, public = (es.enter_context(UpstreamServer()) for _ in range(4))
        gw, admin = es.enter_context(routing_gateway(db))
        for name, up, tokenizer in (("loc", local, str(tiny_model_dir)), ("bare", bare, None),
                                    ("pub", public, str(tiny_model_dir))):
            r = admin.client.post("/admin/pools", json={"name": name, "kind": "local", "model": "up-model",
                                                        "tokenizer": tokenizer,
                                                        "replicas": [{"name": "r0", "base_url": up.base_url}]})
            assert r.status_code == 201, r.text
        admin.backend("ext", ext.base_url, kind="openai", model="up-model")
        rules = [{"match": {"model": "m", "sensitivity": "sensitive"}, "backend": "loc"},
                 {"match": {"model": "m", "sensitivity": "public"}, "backend": "ext"},
                 {"match": {"model": "nb", "sensitivity": "sensitive"}, "backend": "bare"},
                 {"match": {"model": "nb", "sensitivity": "public"}, "backend": "ext"},
                 {"match": {"model": "extonly", "sensitivity": "public"}, "backend": "ext"},
                 {"match": {"model": "lp", "sensitivity": "sensitive"}, "backend": "loc"},
                 {"match": {"model": "lp", "sensitivity": "public"}, "backend": "pub"}]
        admin.routes(rules)
        key = admin.key(admin.tenant(name="tok")["id"])["key"]
        client = es.enter_context(openai.OpenAI(base_url=gw.url + "/v1", api_key=key, max_retries=0, timeout=30))
        yield {"gw": gw, "local": local, "bare": bare, "ext": ext, "public": public, "client": client, "key": key,
               "tok": Tokenizer(tiny_model_dir)}


def _pii(kind: str, r: random.Random) -> str:
    if kind == "tckn":
        return make_tckn(r)
    if kind == "iban":
        return fmt_iban(r, make_iban(r))
    return make_phone(r)


def _ids(tok: Tokenizer, text: str, split: str) -> list[int]:
    """`text` as token ids: the tokenizer's own split, or one character at a time (ids the
    tokenizer would never choose, which still decode to the same text)."""
    if split == "canonical":
        return tok.encode(text)
    return [t for ch in text for t in tok.encode(ch, add_special_tokens=False)]


def _send(world: dict[str, Any], endpoint: str, model: str, prompt: Any) -> None:
    if endpoint == "completions":
        world["client"].completions.create(model=model, prompt=prompt, max_tokens=2)
    else:
        world["client"].embeddings.create(model=model, input=prompt)


def _sent(up: UpstreamServer) -> Any:
    body = up.received[-1]
    return body.get("prompt", body.get("input"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["tckn", "iban", "phone"]), seed=st.integers(0, 2**32 - 1),
       split=st.sampled_from(["canonical", "chars"]), form=st.sampled_from(["ids", "nested", "batch", "mixed"]),
       endpoint=st.sampled_from(["completions", "embeddings"]))
def test_token_ids_of_personal_data_never_reach_the_external_upstream(
        world: dict[str, Any], kind: str, seed: int, split: str, form: str, endpoint: str) -> None:
    r = random.Random(seed)
    text = r.choice(["Müşteri {} için kaydı güncelle.", "{}", "Bilgi: {} tamam", "Ara {} lütfen"]).format(_pii(kind, r))
    assume(classify_parts([text]).sensitive)  # personal data as text: then as token ids too
    ids = _ids(world["tok"], text, split)
    prompt: Any = {"ids": ids, "nested": [ids], "batch": [_ids(world["tok"], "Merhaba dünya", split), ids],
                   "mixed": ["Merhaba dünya", ids]}[form]
    ext_before, local_before = len(world["ext"].received), len(world["local"].received)
    _send(world, endpoint, "m", prompt)
    assert len(world["ext"].received) == ext_before
    assert len(world["local"].received) == local_before + 1 and _sent(world["local"]) == prompt


@pytest.mark.parametrize("endpoint", ["completions", "embeddings"])
def test_token_ids_read_as_public_text_go_where_they_are_read_alike(world: dict[str, Any], endpoint: str) -> None:
    """The tokenizer really is read: ids of a harmless sentence take the public route when its
    backend reads them with that tokenizer; ids of personal data take the sensitive route."""
    tok = world["tok"]
    ids = tok.encode("Toplantı yarın saat onda.")
    for prompt in (ids, [ids, ids]):
        before = len(world["public"].received)
        _send(world, endpoint, "lp", prompt)
        assert len(world["public"].received) == before + 1 and _sent(world["public"]) == prompt
    personal = tok.encode(f"Müşteri {make_tckn(random.Random(7))} için kaydı güncelle.")
    _send(world, endpoint, "lp", personal)
    assert _sent(world["local"]) == personal


@pytest.mark.parametrize("endpoint", ["completions", "embeddings"])
def test_token_ids_never_go_to_a_backend_that_reads_them_otherwise(world: dict[str, Any], endpoint: str) -> None:
    """Issue 35: ids for an external API are its tokenizer's, not ours; however harmless they read
    with ours, they stay local."""
    ids = world["tok"].encode("Toplantı yarın saat onda.")
    before = len(world["ext"].received)
    _send(world, endpoint, "m", ids)
    assert _sent(world["local"]) == ids and len(world["ext"].received) == before


@pytest.mark.parametrize("endpoint", ["completions", "embeddings"])
def test_ids_nobody_here_can_read_stay_local_or_get_503(world: dict[str, Any], endpoint: str) -> None:
    tok, ext = world["tok"], world["ext"]
    harmless = tok.encode("Toplantı yarın saat onda.")
    before = len(ext.received)
    _send(world, endpoint, "m", [*harmless, tok.vocab_size + 7])  # outside the vocabulary
    assert _sent(world["local"])[-1] == tok.vocab_size + 7
    _send(world, endpoint, "nb", harmless)  # the pool serving `nb` has no tokenizer
    assert _sent(world["bare"]) == harmless
    with pytest.raises(openai.APIStatusError) as refused:  # no local route for `extonly`
        _send(world, endpoint, "extonly", harmless)
    assert refused.value.status_code == 503 and refused.value.code == "no_local_backend"
    assert refused.value.response.headers["retry-after"] == "1"
    assert len(ext.received) == before  # none of it left


def test_a_chat_part_the_classifier_cannot_read_stays_local(world: dict[str, Any]) -> None:
    before = len(world["ext"].received)
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    r = httpx.post(world["gw"].url + "/v1/chat/completions", headers={"authorization": f"Bearer {world['key']}"},
                   json={"model": "m", "max_tokens": 2, "messages": [{"role": "user", "content": [
                       {"type": "text", "text": "Ne görüyorsun?"}, image]}]})
    assert r.status_code == 200, r.text
    assert world["local"].received[-1]["messages"][0]["content"][1] == image
    assert len(world["ext"].received) == before
