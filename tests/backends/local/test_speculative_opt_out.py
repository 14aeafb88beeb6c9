"""`"speculative": false` in a request body: read by the wire layer, honoured by the engine."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fairgate.backends.base import GenerationRequest
from fairgate.backends.local.engine.async_engine import AsyncEngine, EngineConfig
from fairgate.backends.local.serving.backend import LocalBackend
from fairgate.backends.openai_wire import WireError, parse_request

# A repetitive prompt: n-gram lookup finds a draft at every greedy step.
PROMPT = [5, 6, 7, 8, 9, 10, 11] * 4


@pytest.fixture
async def backend(tiny_model_dir: Path) -> AsyncIterator[LocalBackend]:
    config = EngineConfig(str(tiny_model_dir), num_kv_blocks=64, block_size=4, served_model_name="tiny",
                          speculative="ngram", speculative_adaptive=False)
    b = LocalBackend(AsyncEngine(config))
    yield b
    await b.aclose()


def _req(rid: str, **extra: object) -> GenerationRequest:
    body = {"model": "tiny", "prompt": PROMPT, "max_tokens": 12, "temperature": 0, "ignore_eos": True, **extra}
    return GenerationRequest.from_body(rid, "completion", body)


async def test_opted_out_request_gets_no_drafts_and_the_same_tokens(backend: LocalBackend) -> None:
    before = backend.stats().spec_draft_tokens
    off = await backend.complete(_req("off", speculative=False))
    assert backend.stats().spec_draft_tokens == before  # not one proposal for this request
    on = await backend.complete(_req("on"))
    assert backend.stats().spec_draft_tokens > before  # the same request, not opted out, drafts
    assert off["choices"][0]["text"] == on["choices"][0]["text"]  # greedy: identical either way
    explicit = await backend.complete(_req("on2", speculative=True))
    assert explicit["choices"][0]["text"] == on["choices"][0]["text"]


@pytest.mark.parametrize("value", ["false", 0, 1, [], {}])
def test_a_non_boolean_speculative_is_a_400_naming_it(value: object) -> None:
    with pytest.raises(WireError) as err:
        parse_request("chat", {"model": "m", "messages": [{"role": "user", "content": "x"}], "speculative": value})
    assert err.value.status == 400 and err.value.param == "speculative"


def test_the_reading_carries_the_choice() -> None:
    body = {"model": "m", "prompt": "x"}
    assert parse_request("completion", body).speculative is None
    assert parse_request("completion", {**body, "speculative": False}).speculative is False
