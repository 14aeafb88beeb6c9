"""Issue 38: the thinking of a reasoning model kept apart from its answer, the same whole or
streamed whatever the token boundaries (backends/local/serving/reasoning.py)."""

from __future__ import annotations

import random

import pytest

from fairgate.backends.local.serving.reasoning import ReasoningFormat, ReasoningStream

QWEN3 = ReasoningFormat.of("qwen3")
R1 = ReasoningFormat.of("deepseek_r1")


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
])
def test_whole_outputs_split_into_thinking_and_answer(fmt, text, want):
    assert fmt.split(text) == want


@pytest.mark.parametrize("fmt", [QWEN3, R1])
def test_any_split_into_pieces_gives_the_whole_answer(fmt):
    rng = random.Random(7)
    texts = ["<think>\nLet me see: 2 < 3 and </thin is not a tag.\n</think>\n\nYes, 2 < 3.",
             "plain answer with <b>html</b>", "<think>no end", " \n<think>x</think>  \n y",
             "think</think>done", "<", "</think"]
    for text in texts:
        whole = fmt.split(text)
        for _ in range(40):
            cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(0, 6)))) if len(text) > 1 else []
            pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
            stream = ReasoningStream(fmt)
            got = [stream.feed(p) for p in pieces[:-1]] + [stream.feed(pieces[-1], final=True)]
            reasoning = "".join(r for r, _ in got)
            content = "".join(c for _, c in got)
            assert ((reasoning if stream.reasoned else None), content) == whole, (text, pieces)


def test_reasoning_tokens_count_through_the_end_tag():
    fmt = ReasoningFormat("qwen3", opens_in_prompt=False, end_id=9)
    assert fmt.reasoning_tokens([8, 1, 2, 9, 5, 6], "12", ended=True) == 4
    assert fmt.reasoning_tokens([8, 1, 2], "12", ended=False) == 3  # cut off while thinking
    assert fmt.reasoning_tokens([5, 6], None, ended=True) == 0


def test_an_unknown_parser_is_refused_by_name():
    with pytest.raises(ValueError, match="qwen3, deepseek_r1"):
        ReasoningFormat.of("granite")
