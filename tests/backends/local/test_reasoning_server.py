"""Issue 38: a reasoning model's thinking, through a real `fairgate engine --reasoning-parser qwen3`
driven by the official `openai` SDK: it arrives in `reasoning_content`, never in `content`,
streamed or not, and is counted in `completion_tokens_details.reasoning_tokens`;
`chat_template_kwargs: {"enable_thinking": false}` (Qwen3's template closes an empty thinking in
the prompt) yields an answer with no thinking. The model is scripted (tests/helpers/scripted_model.py):
its greedy output is known in advance, so the test checks the server, not the model."""

from __future__ import annotations

import time

import openai
import pytest

from tests.helpers.reasoning_server import MESSAGES, ask, ask_streamed, outcome, scripted_client
from tests.helpers.scripted_model import END_THINK, IM_END, PARAGRAPH, THINK, make_scripted_model

# after the generation prompt "<|im_start|>assistant\n": <think> engine blocks </think>\n\n cache tokens
# <|im_end|>; with thinking off the prompt ends "...</think>\n\n", so the answer starts at " cache"
CHAIN = {"\n": THINK, THINK: " engine", " engine": " blocks", " blocks": END_THINK, END_THINK: PARAGRAPH,
         PARAGRAPH: " cache", " cache": " tokens", " tokens": IM_END}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from scripted_client(tmp_path_factory.mktemp("scripted") / "qwen3-scripted", CHAIN, "qwen3")


def test_thinking_arrives_in_reasoning_content_not_in_content(server):
    # <think> engine blocks </think>: four of the eight generated tokens (\n\n cache tokens <|im_end|>: the answer)
    assert outcome(ask(server)) == (" engine blocks", "cache tokens", "stop", 8, 4)


def test_streamed_thinking_comes_as_reasoning_deltas_first(server):
    got = ask_streamed(server)
    assert (got.reasoning, got.content) == (" engine blocks", "cache tokens")
    assert got.thoughts_first  # every thought before the answer
    assert THINK not in got.content + got.reasoning and END_THINK not in got.content + got.reasoning
    assert got.usage.completion_tokens_details.reasoning_tokens == 4


def test_enable_thinking_false_yields_no_thinking(server):
    for stream in (False, True):
        kwargs = {"extra_body": {"chat_template_kwargs": {"enable_thinking": False}}}
        if not stream:
            r = ask(server, **kwargs)
            assert r.choices[0].message.content == " cache tokens"
            assert getattr(r.choices[0].message, "reasoning_content", None) is None
            assert r.usage.completion_tokens_details.reasoning_tokens == 0
            continue
        chunks = list(ask(server, stream=True, **kwargs))
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == " cache tokens"
        assert not any((c.choices[0].delta.model_extra or {}).get("reasoning_content") for c in chunks if c.choices)


def test_thinking_cut_by_max_tokens_is_all_reasoning(server):
    r = ask(server, max_tokens=2)
    assert r.choices[0].finish_reason == "length"
    assert r.choices[0].message.reasoning_content == " engine"
    assert r.choices[0].message.content is None
    assert r.usage.completion_tokens_details.reasoning_tokens == 2


def test_template_kwargs_that_would_replace_the_request_are_refused(server):
    with pytest.raises(openai.BadRequestError) as err:
        server.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=2,
                                       extra_body={"chat_template_kwargs": {"messages": []}})
    assert err.value.body["param"] == "chat_template_kwargs"
    with pytest.raises(openai.BadRequestError) as err:
        server.completions.create(model="tiny", prompt="hi", max_tokens=2,
                                  extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    assert err.value.body["param"] == "chat_template_kwargs"


def test_the_gateway_passes_the_thinking_through_and_bills_it(tmp_path_factory):
    """The gateway's embedded engine with `reasoning_parser: qwen3`: the same split, through the
    gateway's own request path, and the usage row counts every generated token."""
    import httpx

    from fairgate.gateway.settings import Settings
    from tests.gateway.harness import ADMIN_TOKEN, Admin, GatewayThread

    base = tmp_path_factory.mktemp("gw")
    folder = make_scripted_model(base / "qwen3-scripted", CHAIN)
    settings = Settings(admin_token=ADMIN_TOKEN, database_url=f"sqlite:///{base}/g.db", model=str(folder),
                        reasoning_parser="qwen3")
    with GatewayThread(settings) as gw:
        admin = Admin(gw.url)
        key = admin.key(admin.tenant()["id"])["key"]
        with openai.OpenAI(base_url=gw.url + "/v1", api_key=key, max_retries=0, timeout=60) as client:
            r = client.chat.completions.create(model=folder.name, messages=MESSAGES, max_tokens=20, temperature=0)
            assert (r.choices[0].message.reasoning_content, r.choices[0].message.content) == (" engine blocks",
                                                                                              "cache tokens")
            assert r.usage.completion_tokens_details.reasoning_tokens == 4
            chunks = list(client.chat.completions.create(model=folder.name, messages=MESSAGES, max_tokens=20,
                                                         temperature=0, stream=True))
        thoughts = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
                           for c in chunks if c.choices)
        assert thoughts == " engine blocks"
        deadline, rows = time.monotonic() + 30, []
        while len(rows) < 2 and time.monotonic() < deadline:  # usage rows are written off the request path
            rows = httpx.get(gw.url + "/admin/usage/requests",
                             headers={"authorization": f"Bearer {ADMIN_TOKEN}"}).json()["data"]
            time.sleep(0.1)
        assert sorted(row["completion_tokens"] for row in rows) == [8, 8]
        admin.close()


def test_structured_output_applies_to_the_answer_after_the_thinking(server):
    choices = ["cache", "blocks"]
    r = ask(server, extra_body={"guided_choice": choices})
    # the thinking is the model's own (" engine" would break the grammar), the answer one of the choices
    assert r.choices[0].message.reasoning_content == " engine blocks"
    assert r.choices[0].message.content in choices
    off = ask(server, extra_body={"guided_choice": choices,
                                   "chat_template_kwargs": {"enable_thinking": False}})
    assert off.choices[0].message.content in choices
    assert getattr(off.choices[0].message, "reasoning_content", None) is None


def test_the_responses_api_returns_the_thinking_as_a_reasoning_item(server):
    r = server.responses.create(model="tiny", input="Which animal?", max_output_tokens=20, temperature=0)
    kinds = [item.type for item in r.output]
    assert kinds == ["reasoning", "message"]
    assert r.output[0].content[0].text == " engine blocks" and r.output_text == "cache tokens"
    assert r.usage.output_tokens_details.reasoning_tokens == 4
    events = list(server.responses.create(model="tiny", input="Which animal?", max_output_tokens=20, temperature=0,
                                          stream=True))
    thought = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    answer = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert (thought, answer) == (" engine blocks", "cache tokens")
    first_answer = next(i for i, e in enumerate(events) if e.type == "response.output_text.delta")
    assert max(i for i, e in enumerate(events) if e.type == "response.reasoning_text.delta") < first_answer
    done = events[-1]
    assert done.type == "response.completed" and [i.type for i in done.response.output] == ["reasoning", "message"]
