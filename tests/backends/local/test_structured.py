"""Grammar state against the sequence it follows: catch-up, rollback, and preemption in the engine."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import jsonschema

from fairgate.backends.base import GenerationRequest
from fairgate.backends.local.engine.async_engine import AsyncEngine, EngineConfig
from fairgate.backends.local.sampling.structured import GrammarRequest, GrammarState
from fairgate.backends.local.serving.backend import LocalBackend
from tests.helpers.json_schemas import SCHEMAS


def test_state_follows_the_sequence_forward_and_back(tiny_model_dir: Path) -> None:
    backend = LocalBackend(AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=16)))
    try:
        tok = backend.engine.tokenizer
        compiled = backend.info.grammars.compile(GrammarRequest("choice", ["yes", "yellow"], "guided_choice"))
        state = GrammarState(compiled)
        ids = tok.encode("yellow", add_special_tokens=False)
        state.sync(ids[:2])
        assert state.num_accepted == 2 and not state.failed
        state.sync(ids[:1])  # a recompute / rejected tokens: fewer generated tokens than accepted
        assert state.num_accepted == 1 and not state.failed
        state.sync(ids)
        assert state.num_accepted == len(ids) and not state.failed
        bad = GrammarState(compiled)
        bad.sync(tok.encode("no", add_special_tokens=False))
        assert bad.failed  # a token outside the grammar: masking stops rather than corrupting
    finally:
        backend.engine.close()


async def test_structured_requests_stay_valid_through_preemption(tiny_model_dir: Path) -> None:
    # 10 blocks x 16 tokens for 8 concurrent requests of ~20 prompt + up to 120 tokens: they preempt.
    engine = AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=10, served_model_name="tiny"))
    backend = LocalBackend(engine)
    schemas = SCHEMAS[5:13]

    async def one(i: int, schema: dict) -> str:
        body = {"messages": [{"role": "user", "content": "JSON please"}], "max_tokens": 120, "seed": i,
                "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}}
        r = await backend.complete(GenerationRequest.from_body(f"r{i}", "chat", body))
        return r["choices"][0]["message"]["content"]

    try:
        outputs = await asyncio.gather(*(one(i, s) for i, s in enumerate(schemas)))
        assert engine.stats().preemptions > 0
        for schema, text in zip(schemas, outputs, strict=True):
            jsonschema.validate(json.loads(text), schema)
    finally:
        await engine.aclose()
