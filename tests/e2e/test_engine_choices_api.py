"""n > 1 and batched prompts on a real `fairgate engine` process, driven by the openai SDK."""

from __future__ import annotations

import time

import httpx
import openai
import pytest


def stats(server: str) -> dict:
    for _ in range(400):
        s = httpx.get(server + "/stats").json()
        if s["running"] == 0 and s["waiting"] == 0:
            return s
        time.sleep(0.05)
    raise AssertionError("engine did not drain")


PROMPT = "The engine keeps the key and value cache in blocks of sixteen tokens and shares full blocks."


def test_n2_one_prefill_shared_blocks_and_prompt_counted_once(client: openai.OpenAI, server: str) -> None:
    prompt = PROMPT + " Salt one."
    before = stats(server)
    r = client.completions.create(model="tiny", prompt=prompt, n=2, max_tokens=8, seed=7, temperature=1.0,
                                  extra_body={"ignore_eos": True})
    after = stats(server)
    n_prompt = r.usage.prompt_tokens
    assert [c.index for c in r.choices] == [0, 1] and n_prompt > 16
    assert r.usage.completion_tokens == 16
    assert r.choices[0].text != r.choices[1].text  # seeds 7 and 8
    # The second choice computed only the partial last block of the prompt, not its full blocks.
    full_blocks_tokens = (n_prompt // 16) * 16
    assert after["prefix_cache_hits"] - before["prefix_cache_hits"] == full_blocks_tokens
    assert after["tokens_computed"] - before["tokens_computed"] == n_prompt + (n_prompt - full_blocks_tokens) + 2 * 7
    again = client.completions.create(model="tiny", prompt=prompt, n=2, max_tokens=8, seed=7, temperature=1.0,
                                      extra_body={"ignore_eos": True})
    assert [c.text for c in again.choices] == [c.text for c in r.choices]  # per-choice seeds reproduce


def test_chat_n2_and_streamed_choices(client: openai.OpenAI) -> None:
    msgs = [{"role": "user", "content": "Hello"}]
    r = client.chat.completions.create(model="tiny", messages=msgs, n=2, max_tokens=5, seed=3,
                                       extra_body={"ignore_eos": True})
    assert [c.index for c in r.choices] == [0, 1] and r.usage.completion_tokens == 10
    texts = {0: "", 1: ""}
    finished = set()
    usage = None
    for c in client.chat.completions.create(model="tiny", messages=msgs, n=2, max_tokens=5, seed=3, stream=True,
                                            stream_options={"include_usage": True}, extra_body={"ignore_eos": True}):
        if c.usage:
            usage = c.usage
        for ch in c.choices:
            texts[ch.index] += ch.delta.content or ""
            if ch.finish_reason:
                finished.add(ch.index)
    assert finished == {0, 1} and texts == {c.index: c.message.content for c in r.choices}
    assert usage.completion_tokens == 10 and usage.prompt_tokens == r.usage.prompt_tokens


def test_batched_prompts_strings_and_token_ids(client: openai.OpenAI) -> None:
    greedy = dict(model="tiny", max_tokens=4, temperature=0, extra_body={"ignore_eos": True})
    singles = [client.completions.create(prompt=p, **greedy) for p in ("Hello world", "Bugün hava")]
    batch = client.completions.create(prompt=["Hello world", "Bugün hava"], **greedy)
    assert [c.index for c in batch.choices] == [0, 1]
    assert [c.text for c in batch.choices] == [s.choices[0].text for s in singles]
    assert batch.usage.prompt_tokens == sum(s.usage.prompt_tokens for s in singles)
    ids = client.completions.create(prompt=[[1, 40, 41, 42], [1, 50, 51]], n=2, **greedy)
    assert [c.index for c in ids.choices] == [0, 1, 2, 3] and ids.usage.prompt_tokens == 7
    assert ids.choices[0].text == ids.choices[1].text  # greedy: both choices of a prompt agree
    one = client.completions.create(prompt=[[1, 40, 41, 42]], **greedy)  # what lm-eval sends
    assert one.choices[0].text == ids.choices[0].text and len(one.choices) == 1


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"n": 0}, "n"),
        ({"n": "2"}, "n"),
        ({"n": 200}, "n"),
        ({"n": 1.5}, "n"),
        ({"prompt": [[]]}, "prompt"),
        ({"prompt": [["a"]]}, "prompt"),
        ({"prompt": ["ok", ""]}, "prompt"),
        ({"prompt": [[1, 2], [1, 99999]]}, "prompt"),
    ],
)
def test_bad_choices_are_400_and_nothing_runs(server: str, body: dict, param: str) -> None:
    r = httpx.post(server + "/v1/completions", json={"model": "tiny", "prompt": "Hi", "max_tokens": 3, **body})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param
    s = stats(server)
    assert s["running"] == 0 and s["kv_blocks_used"] == 0


def test_retrieve_the_served_model(client: openai.OpenAI) -> None:
    m = client.models.retrieve("tiny")
    assert m.id == "tiny" and m.owned_by == "fairgate"
    with pytest.raises(openai.NotFoundError) as err:
        client.models.retrieve("other")
    assert err.value.body["code"] == "model_not_found"
