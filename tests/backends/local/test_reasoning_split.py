"""Issue 38: the thinking of a reasoning model kept apart from its answer, the same whole or
streamed whatever the token boundaries (backends/local/serving/reasoning.py)."""

from __future__ import annotations

import json
import random

import pytest

from fairgate.backends.local.serving.reasoning import ReasoningFormat
from fairgate.backends.local.serving.tool_parsers import parse_hermes

QWEN3 = ReasoningFormat.of("qwen3")
R1 = ReasoningFormat.of("deepseek_r1")
GPT_OSS = ReasoningFormat.of("gpt_oss")
# gpt-oss's harmony messages after the generation prompt "<|start|>assistant" (the end markers
# <|return|> and <|call|> are EOS tokens, so usually not in the text; <|end|> is)
THOUGHT = "<|channel|>analysis<|message|>User asks 2+2. Easy.<|end|>"
ANSWER = "<|start|>assistant<|channel|>final<|message|>It is 4."


@pytest.mark.parametrize(("fmt", "text", "want"), [
    (QWEN3, "<think>\nadd 2 and 2\n</think>\n\nIt is 4.", ("\nadd 2 and 2\n", "It is 4.")),
    (QWEN3, "It is 4.", (None, "It is 4.")),  # enable_thinking false: no thinking at all
    (QWEN3, "  <think>a</think>b", ("a", "b")),
    (QWEN3, "<think>cut off by max_tok", ("cut off by max_tok", "")),
    (QWEN3, "a </think> b", (None, "a </think> b")),  # no opening tag: all answer
    (QWEN3, "<thinking>x", (None, "<thinking>x")),
    (R1, "step one\n</think>\n\nanswer", ("step one\n", "answer")),
    (R1, "<think>step</think>answer", ("step", "answer")),
    (R1, "never closed", ("never closed", "")),
    (R1, "</think>", ("", "")),
    (GPT_OSS, THOUGHT + ANSWER, ("User asks 2+2. Easy.", "It is 4.")),
    (GPT_OSS, THOUGHT + ANSWER + "<|return|>", ("User asks 2+2. Easy.", "It is 4.")),
    (GPT_OSS, "<|channel|>final<|message|>Just 4.", (None, "Just 4.")),  # reasoning effort low: no thinking
    (GPT_OSS, "It is 4.", (None, "It is 4.")),  # no harmony header: all answer
    (GPT_OSS, "<|channel|>analysis<|message|>cut off by max_tok", ("cut off by max_tok", "")),
    (GPT_OSS, "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>analysis<|message|>b<|end|>"
              "<|start|>assistant<|channel|>final<|message|>c", ("a\nb", "c")),  # two thoughts, a line apart
    # a preamble on the commentary channel is for the user; <|end|> undecoded still ends a body
    (GPT_OSS, "<|channel|>analysis<|message|>t<|start|>assistant<|channel|>commentary<|message|>Checking."
              "<|end|><|start|>assistant<|channel|>final<|message|>Done", ("t", "Checking.\nDone")),
    # a call to a function becomes a Hermes tool call in the answer (--tool-call-parser hermes)
    (GPT_OSS, THOUGHT + '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json'
              '<|message|>{"city": "Ankara"}', ("User asks 2+2. Easy.",
                                                '<tool_call>{"name": "get_weather", "arguments": {"city": "Ankara"}}'
                                                "</tool_call>")),
    # input to a built-in tool (not one of the request's functions) is thinking
    (GPT_OSS, "<|channel|>analysis to=python<|message|>print(1)<|call|>", ("print(1)", "")),
    (GPT_OSS, "<|channel|>final<|message|>x<|return|>ignored", (None, "x")),  # nothing after the return
    (GPT_OSS, "<|channel|>analy", (None, "")),  # a header cut off: nothing to show
])
def test_whole_outputs_split_into_thinking_and_answer(fmt, text, want):
    assert fmt.split(text) == want


@pytest.mark.parametrize("fmt", [QWEN3, R1, GPT_OSS])
def test_any_split_into_pieces_gives_the_whole_answer(fmt):
    rng = random.Random(7)
    texts = ["<think>\nLet me see: 2 < 3 and </thin is not a tag.\n</think>\n\nYes, 2 < 3.",
             "plain answer with <b>html</b>", "<think>no end", " \n<think>x</think>  \n y",
             "think</think>done", "<", "</think"]
    if fmt is GPT_OSS:
        texts = [THOUGHT + ANSWER + "<|return|>", "<|channel|>analysis<|message|>a <| b <|en c<|end|>"
                 "<|start|>assistant<|channel|>commentary to=functions.f<|message|>{}<|call|>", "plain <|x|>",
                 "<|channel|>final<|message|>only", "<|chan", "<|channel|>analysis<|message|><|end|>"]
    for text in texts:
        whole = fmt.split(text)
        for _ in range(40):
            cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(0, 6)))) if len(text) > 1 else []
            pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
            stream = fmt.stream()
            got = [stream.feed(p) for p in pieces[:-1]] + [stream.feed(pieces[-1], final=True)]
            reasoning = "".join(r for r, _ in got)
            content = "".join(c for _, c in got)
            assert ((reasoning if stream.reasoned else None), content) == whole, (text, pieces)


def test_reasoning_tokens_count_through_the_end_tag():
    fmt = ReasoningFormat("qwen3", opens_in_prompt=False, end_id=9)
    assert fmt.reasoning_tokens([8, 1, 2, 9, 5, 6], "12", ended=True) == 4
    assert fmt.reasoning_tokens([8, 1, 2], "12", ended=False) == 3  # cut off while thinking
    assert fmt.reasoning_tokens([5, 6], None, ended=True) == 0


def test_gpt_oss_reasoning_tokens_count_through_the_answers_header():
    """Everything before the answer's body is thinking: <|channel|> final <|message|> as three tokens."""
    fmt = ReasoningFormat.of("gpt_oss", {"<|channel|>": 7, "final": 8, "<|message|>": 9, "analysis": 5})
    thinking = [7, 5, 9, 1, 2, 3, 4]  # <|channel|>analysis<|message|> ... <|end|><|start|>assistant
    assert fmt.reasoning_tokens(thinking + [7, 8, 9, 30, 31], "x", ended=True) == 10
    assert fmt.reasoning_tokens(thinking, "x", ended=False) == 7
    assert fmt.reasoning_tokens([7, 8, 9, 30], None, ended=True) == 0
    # thinking, then a tool call (<|channel|>commentary to=... <|message|> {...}): its body is no thinking
    assert fmt.reasoning_tokens(thinking + [7, 40, 41, 9, 50, 51], "x", ended=True) == 11
    with pytest.raises(ValueError, match="several tokens"):  # structured output cannot find the answer
        fmt.grammar_after([1, 2])
    assert fmt.keeps_special_tokens and not QWEN3.keeps_special_tokens


def test_an_unknown_parser_is_refused_by_name():
    with pytest.raises(ValueError, match="qwen3, deepseek_r1, gpt_oss"):
        ReasoningFormat.of("granite")


def test_a_harmony_function_call_is_a_tool_call_for_the_hermes_parser():
    _, content = GPT_OSS.split(THOUGHT + "<|start|>assistant<|channel|>commentary to=functions.get_weather"
                               ' <|constrain|>json<|message|>{"city": "Ankara"}<|call|>')
    text, calls = parse_hermes(content)
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("get_weather", {"city": "Ankara"})]
    assert not text
