"""Issue 38: gpt-oss's harmony output through a real `fairgate engine --reasoning-parser gpt_oss`
driven by the `openai` SDK: the analysis channel arrives in `reasoning_content` (a `reasoning`
item in the Responses API), the final channel in `content`, no marker in either, streamed or not,
and the thinking is counted in `completion_tokens_details.reasoning_tokens`. The model is scripted
(tests/helpers/scripted_model.py) with harmony's markers as special tokens, as gpt-oss's tokenizer
has them: the engine must keep them in the decoded text for the parser to see them."""

from __future__ import annotations

import openai
import pytest

from tests.helpers.reasoning_server import MESSAGES, ask, ask_streamed, outcome, scripted_client
from tests.helpers.scripted_model import (
    FIRST_HEADER,
    H_CHANNEL,
    H_END,
    H_MESSAGE,
    H_RETURN,
    H_START,
)

# after the generation prompt "<|start|>assistant":
# <|channel|>analysis<|message|> engine blocks<|end|><|start|><|channel|>final<|message|> cache tokens<|return|>
CHAIN = {"assistant": FIRST_HEADER, FIRST_HEADER: " engine", " engine": " blocks", " blocks": H_END, H_END: H_START,
         H_START: H_CHANNEL, H_CHANNEL: "final", "final": H_MESSAGE, H_MESSAGE: " cache", " cache": " tokens",
         " tokens": H_RETURN}
MARKERS = (H_START, H_CHANNEL, H_MESSAGE, H_END, H_RETURN, "analysis", "final")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from scripted_client(tmp_path_factory.mktemp("scripted") / "harmony-scripted", CHAIN, "gpt_oss", harmony=True)


def test_the_analysis_channel_arrives_in_reasoning_content(server):
    # header, engine, blocks, <|end|>, <|start|>, <|channel|>, final, <|message|>: eight of the eleven
    assert outcome(ask(server)) == (" engine blocks", " cache tokens", "stop", 11, 8)


def test_streamed_analysis_comes_as_reasoning_deltas_before_the_answer(server):
    got = ask_streamed(server)
    assert (got.reasoning, got.content) == (" engine blocks", " cache tokens")
    assert got.thoughts_first
    assert not any(m in got.reasoning + got.content for m in MARKERS)
    assert got.usage.completion_tokens_details.reasoning_tokens == 8


def test_analysis_cut_by_max_tokens_is_all_reasoning(server):
    r = ask(server, max_tokens=3)
    assert r.choices[0].finish_reason == "length"
    assert (r.choices[0].message.reasoning_content, r.choices[0].message.content) == (" engine blocks", None)
    assert r.usage.completion_tokens_details.reasoning_tokens == 3


def test_the_responses_api_returns_the_analysis_as_a_reasoning_item(server):
    r = server.responses.create(model="tiny", input="Which animal?", max_output_tokens=20, temperature=0)
    assert [item.type for item in r.output] == ["reasoning", "message"]
    assert r.output[0].content[0].text == " engine blocks" and r.output_text == " cache tokens"
    assert r.usage.output_tokens_details.reasoning_tokens == 8


def test_structured_output_is_refused_by_name(server):
    with pytest.raises(openai.BadRequestError) as err:
        server.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=5,
                                       extra_body={"guided_choice": ["a", "b"]})
    assert err.value.body["param"] == "guided_choice" and "several tokens" in err.value.body["message"]


def test_completions_keep_skipping_special_tokens(server):
    """Only chat on the harmony parser keeps the markers; a plain completion's text has none."""
    r = server.completions.create(model="tiny", prompt="<|start|>assistant", max_tokens=20, temperature=0)
    assert r.choices[0].text == " engine blocksfinal cache tokens"  # "final" is a plain token
