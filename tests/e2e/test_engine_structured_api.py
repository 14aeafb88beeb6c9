"""Structured output on real `fairgate engine` processes (the demo model and a random-weight
tiny model), driven by the openai SDK: every output parses and validates."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import jsonschema
import openai
import pytest
from pydantic import BaseModel, Field

from tests.helpers.engine_proc import engine_server
from tests.helpers.json_schemas import SCHEMAS

DEMO = Path(__file__).resolve().parents[2] / "models" / "fairgate-demo"


@pytest.fixture(scope="module")
def demo_client() -> Iterator[openai.OpenAI]:
    with engine_server(DEMO, "--served-model-name", "demo", "--num-kv-blocks", "256", "--max-model-len", "512") as url:
        with openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=300) as c:
            yield c


def run_all(client: openai.OpenAI, model: str) -> list[str]:
    def one(schema: dict) -> str:
        r = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "Give me JSON."}], max_tokens=200, seed=11,
            response_format={"type": "json_schema", "json_schema": {"name": "s", "schema": schema, "strict": True}})
        assert r.choices[0].finish_reason == "stop", r.choices[0].message.content
        return r.choices[0].message.content

    with ThreadPoolExecutor(8) as pool:  # concurrent: the masks run on a batch
        return list(pool.map(one, SCHEMAS))


@pytest.mark.parametrize("which", ["tiny", "demo"])
def test_every_schema_parses_and_validates(which: str, client: openai.OpenAI, request: pytest.FixtureRequest) -> None:
    c = client if which == "tiny" else request.getfixturevalue("demo_client")
    outputs = run_all(c, which)
    assert len(outputs) == len(SCHEMAS) >= 20
    for schema, text in zip(SCHEMAS, outputs, strict=True):
        jsonschema.validate(json.loads(text), schema)


class Person(BaseModel):
    name: str = Field(max_length=8)
    age: int = Field(ge=0, le=120)


def test_openai_parse_with_pydantic_and_json_object(client: openai.OpenAI, demo_client: openai.OpenAI) -> None:
    r = client.chat.completions.parse(model="tiny", messages=[{"role": "user", "content": "A person."}],
                                      response_format=Person, max_tokens=120, seed=3)
    assert isinstance(r.choices[0].message.parsed, Person) and 0 <= r.choices[0].message.parsed.age <= 120
    obj = demo_client.chat.completions.create(model="demo", messages=[{"role": "user", "content": "JSON"}], max_tokens=200,
                                         seed=1, response_format={"type": "json_object"})
    text = obj.choices[0].message.content
    # An open object has no size bound, so a random model may run to max_tokens inside it (as on
    # OpenAI); what it wrote is still an object's start, with no raw control character.
    assert text.startswith("{") and not any(ord(ch) < 0x20 for ch in text)
    if obj.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(text), dict)


def test_vllm_guided_fields(client: openai.OpenAI) -> None:
    ask = dict(model="tiny", messages=[{"role": "user", "content": "?"}], max_tokens=20)
    for seed in range(4):
        choice = client.chat.completions.create(**ask, seed=seed, extra_body={"guided_choice": ["yes", "no"]})
        assert choice.choices[0].message.content in ("yes", "no")
        rx = client.chat.completions.create(**ask, seed=seed, extra_body={"guided_regex": "[a-c]{3}-[0-9]"})
        assert len(rx.choices[0].message.content) == 5 and rx.choices[0].message.content[3] == "-"
    so = client.completions.create(model="tiny", prompt="x", max_tokens=40, seed=2,
                                   extra_body={"structured_outputs": {"json": SCHEMAS[3]}})
    jsonschema.validate(json.loads(so.choices[0].text), SCHEMAS[3])
    n2 = client.chat.completions.create(**ask, n=3, seed=5, extra_body={"guided_choice": ["alpha", "beta"]})
    assert all(c.message.content in ("alpha", "beta") for c in n2.choices)


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"response_format": {"type": "xml"}}, "response_format"),
        ({"response_format": "json"}, "response_format"),
        ({"response_format": {"type": "json_schema", "json_schema": {"schema": 5}}}, "response_format"),
        ({"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "nope"}}}},
         "response_format"),
        ({"guided_regex": ""}, "guided_regex"),
        ({"guided_regex": "(unclosed"}, "guided_regex"),
        ({"guided_choice": []}, "guided_choice"),
        ({"guided_choice": ["a", 1]}, "guided_choice"),
        ({"guided_json": "not json"}, "guided_json"),
        ({"structured_outputs": {"grammar": "x"}}, "structured_outputs"),
        ({"guided_regex": "a", "guided_choice": ["a"]}, "guided_choice"),
    ],
)
def test_bad_structured_fields_are_400(server: str, extra: dict, param: str) -> None:
    body = {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, **extra}
    r = httpx.post(server + "/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param
    assert httpx.get(server + "/stats").json()["running"] == 0
