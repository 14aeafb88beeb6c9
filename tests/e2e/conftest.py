"""Fixtures for the engine API suites: one `fairgate engine` process per test module
(a module may define its own `server` with other flags)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.helpers.engine_proc import engine_server


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path) -> Iterator[str]:
    """The tiny model served as `tiny` (256-token context, 64-token steps: prompts chunk)."""
    with engine_server(tiny_model_dir, "--served-model-name", "tiny", "--num-kv-blocks", "96",
                       "--max-model-len", "256", "--max-num-batched-tokens", "64") as url:
        yield url


@pytest.fixture(scope="module")
def client(server: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server + "/v1", api_key="unused", max_retries=0, timeout=120) as c:
        yield c
