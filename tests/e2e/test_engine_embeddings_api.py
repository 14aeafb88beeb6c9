"""/v1/embeddings on a real `fairgate engine` process, driven by the openai SDK: every input
form, float and base64, usage, equality with transformers' mean-pooled last hidden state, and
the fields it cannot honour refused by name."""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest
import torch
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM


@pytest.fixture(scope="module")
def reference(tiny_model_dir: Path):
    """(tokenizer, transformers model) of the served folder."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, torch_dtype=torch.float32).eval()
    return Tokenizer.from_file(str(tiny_model_dir / "tokenizer.json")), model


def expected(model, ids: list[int]) -> torch.Tensor:
    """Mean over positions of the last hidden state (after the final norm), L2-normalised."""
    with torch.no_grad():
        h = model.model(torch.tensor([ids])).last_hidden_state[0]  # [T, hidden]
    v = h.mean(dim=0)
    return v / v.norm()


def test_inputs_match_transformers_mean_pooling(client: openai.OpenAI, reference) -> None:
    tok, model = reference
    texts = ["Merhaba dünya, bu bir deneme.", "A second, rather longer sentence about quotas and tenants " * 3]
    r = client.embeddings.create(model="tiny", input=texts, encoding_format="float")
    assert [d.index for d in r.data] == [0, 1] and r.model == "tiny" and r.object == "list"
    ids = [tok.encode(t).ids for t in texts]
    assert r.usage.prompt_tokens == r.usage.total_tokens == sum(len(i) for i in ids)
    for d, i in zip(r.data, ids, strict=True):
        got = torch.tensor(d.embedding)
        assert got.shape == (model.config.hidden_size,)
        assert torch.allclose(got, expected(model, i), atol=1e-4), (got - expected(model, i)).abs().max()
    # One string, token ids, a list of token-id lists: the same vectors for the same tokens.
    one = client.embeddings.create(model="tiny", input=texts[0], encoding_format="float").data[0].embedding
    by_ids = client.embeddings.create(model="tiny", input=ids[0], encoding_format="float").data[0].embedding
    batch = client.embeddings.create(model="tiny", input=ids, encoding_format="float").data
    assert torch.allclose(torch.tensor(one), torch.tensor(by_ids), atol=1e-6)
    assert torch.allclose(torch.tensor(batch[1].embedding), torch.tensor(r.data[1].embedding), atol=1e-6)


def test_base64_is_what_the_sdk_decodes_by_default(client: openai.OpenAI) -> None:
    floats = client.embeddings.create(model="tiny", input="quota", encoding_format="float").data[0].embedding
    default = client.embeddings.create(model="tiny", input="quota")  # the SDK asks base64, decodes it
    assert torch.allclose(torch.tensor(default.data[0].embedding), torch.tensor(floats), atol=1e-6)


def test_a_long_input_is_chunked_and_still_exact(client: openai.OpenAI, reference) -> None:
    tok, model = reference
    text = "Chunked prefill must pool every position once. " * 6  # > 128 tokens: several chunks
    ids = tok.encode(text).ids
    assert len(ids) > 128
    got = torch.tensor(client.embeddings.create(model="tiny", input=text, encoding_format="float").data[0].embedding)
    assert torch.allclose(got, expected(model, ids), atol=1e-4)


@pytest.mark.parametrize(
    ("extra", "param", "status"),
    [
        ({"dimensions": 8}, "dimensions", 400),
        ({"dimensions": "8"}, "dimensions", 400),
        ({"encoding_format": "int8"}, "encoding_format", 400),
        ({"input": ""}, "input", 400),
        ({"input": []}, "input", 400),
        ({"input": [[1, "a"]]}, "input", 400),
        ({"input": 7}, "input", 400),
        ({"input": [10**6]}, "input", 400),
        ({"input": "x " * 600}, "input", 400),
        ({"pooling": "cls"}, "pooling", 400),
        ({"model": "other"}, "model", 404),
    ],
)
def test_bad_fields_are_refused_by_name(server: str, extra: dict, param: str, status: int) -> None:
    r = httpx.post(server + "/v1/embeddings", json={"model": "tiny", "input": "hi", **extra}, timeout=30)
    assert r.status_code == status, r.text
    assert r.json()["error"]["param"] == param


def test_native_dimensions_are_accepted(server: str, reference) -> None:
    size = reference[1].config.hidden_size
    r = httpx.post(server + "/v1/embeddings", json={"model": "tiny", "input": "hi", "dimensions": size}, timeout=30)
    assert r.status_code == 200 and len(r.json()["data"][0]["embedding"]) == size
