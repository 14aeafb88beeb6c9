"""A real `fairgate engine --reasoning-parser <parser>` over a scripted model, seen through the
official `openai` SDK, and the one question the reasoning tests ask it (greedy, 20 tokens at most),
plain or streamed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai

from tests.helpers.engine_proc import engine_server
from tests.helpers.reasoning_stream import ReadStream, read_stream
from tests.helpers.scripted_model import make_scripted_model

MESSAGES = [{"role": "user", "content": "Which animal?"}]


def scripted_client(folder: Path, chain: dict[str, str], parser: str,
                    harmony: bool = False) -> Iterator[openai.OpenAI]:
    """Yield an SDK client on an engine that serves, with `parser`, a model scripted along `chain`
    into `folder` (tests/helpers/scripted_model.py); a module fixture `yield from`s it."""
    make_scripted_model(folder, chain, harmony=harmony)
    with engine_server(folder, "--reasoning-parser", parser) as url:
        with openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=60) as client:
            yield client


def ask(client: openai.OpenAI, max_tokens: int = 20, **kwargs: Any) -> Any:
    """The chat completion of MESSAGES, greedy; `kwargs` go to the SDK (stream, extra_body, ...)."""
    return client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=max_tokens, temperature=0,
                                          **kwargs)


def ask_streamed(client: openai.OpenAI) -> ReadStream:
    """`ask` streamed with the usage chunk, read as a reasoning-aware client reads it."""
    return read_stream(ask(client, stream=True, stream_options={"include_usage": True}))


def outcome(r: Any) -> tuple[Any, Any, str, int, int]:
    """A chat completion as the reasoning tests read it: (reasoning_content, content, finish_reason,
    completion_tokens, reasoning_tokens)."""
    message, usage = r.choices[0].message, r.usage
    return (message.reasoning_content, message.content, r.choices[0].finish_reason, usage.completion_tokens,
            usage.completion_tokens_details.reasoning_tokens)
