"""OutputTracker: stop strings with hold-back, stop ids, eos, max_tokens, over a real tokenizer."""

from __future__ import annotations

from pathlib import Path

import pytest

from fairgate.backends.local.engine.output import OutputTracker
from fairgate.backends.local.engine.types import SamplingParams
from fairgate.backends.local.model.tokenizer import Tokenizer

TEXT = "Hello world! How are you today? I am fine, thank you."


@pytest.fixture(scope="module")
def tok(tiny_model_dir: Path) -> Tokenizer:
    return Tokenizer(tiny_model_dir)


def tracker(tok: Tokenizer, max_tokens: int = 100, **kw) -> OutputTracker:
    return OutputTracker(
        request_id="r",
        sampling=SamplingParams(max_tokens=max_tokens, **kw),
        num_prompt_tokens=3,
        max_tokens=max_tokens,
        eos_token_ids=frozenset({tok.eos_token_id}),
        decoder=tok.detokenizer([1, 2, 3]),
    )


def feed(t: OutputTracker, ids: list[int]) -> list[str]:
    pieces = []
    for i in ids:
        out = t.process([i], cached_tokens=0)
        pieces.append(out.text)
        if out.finished:
            break
    return pieces


def test_no_stop_returns_everything(tok: Tokenizer) -> None:
    ids = tok.encode(TEXT, add_special_tokens=False)
    t = tracker(tok)
    assert "".join(feed(t, ids)) == TEXT
    assert t.finish_reason is None and t.num_tokens_seen == len(ids)


def test_stop_string_cut_and_partial_match_held_back(tok: Tokenizer) -> None:
    ids = tok.encode(TEXT, add_special_tokens=False)
    t = tracker(tok, stop=["are you"])
    pieces = feed(t, ids)
    assert "".join(pieces) == "Hello world! How "
    assert t.finish_reason == "stop" and t.stop_reason == "are you"
    # Nothing after "How " was ever released, even while "are" could still become "are x".
    released = ""
    for p in pieces:
        released += p
        assert "How a" not in released


def test_false_alarm_prefix_is_released_later(tok: Tokenizer) -> None:
    ids = tok.encode(TEXT, add_special_tokens=False)
    t = tracker(tok, stop=["world?"])  # "world" appears, "world?" never does
    pieces = feed(t, ids)
    assert "".join(pieces) == TEXT and t.finish_reason is None
    # At some point the released text stopped short of a decoded "world", then caught up.
    released = ""
    held_once = False
    for p in pieces:
        released += p
        held_once |= released.endswith("Hello ")
    assert held_once


def test_held_text_flushed_on_length(tok: Tokenizer) -> None:
    ids = tok.encode("Hello wor", add_special_tokens=False)
    t = tracker(tok, max_tokens=len(ids), stop=["world!"])
    pieces = feed(t, ids)
    assert "".join(pieces) == "Hello wor"
    assert t.finish_reason == "length" and pieces[-1].endswith("wor")


def test_stop_token_id_counts_but_is_not_decoded(tok: Tokenizer) -> None:
    ids = tok.encode(TEXT, add_special_tokens=False)
    t = tracker(tok, stop_token_ids=[ids[3]])
    out_text = "".join(feed(t, ids))
    assert t.finish_reason == "stop" and t.stop_reason == ids[3]
    assert t.num_tokens_seen == ids.index(ids[3]) + 1
    assert out_text == tok.decode(ids[: ids.index(ids[3])])


def test_eos_stops_unless_ignored(tok: Tokenizer) -> None:
    ids = tok.encode("Hello", add_special_tokens=False) + [tok.eos_token_id] + tok.encode(" you", add_special_tokens=False)
    t = tracker(tok)
    assert "".join(feed(t, ids)) == "Hello" and t.finish_reason == "stop" and t.stop_reason is None
    t = tracker(tok, ignore_eos=True)
    assert "".join(feed(t, ids)) == "Hello you" and t.finish_reason is None


def test_usage_and_max_tokens(tok: Tokenizer) -> None:
    ids = tok.encode(TEXT, add_special_tokens=False)
    t = tracker(tok, max_tokens=4)
    outs = [t.process([i], cached_tokens=2) for i in ids[:4]]
    assert [o.finished for o in outs] == [False, False, False, True]
    assert outs[-1].finish_reason == "length"
    assert (outs[-1].usage.prompt_tokens, outs[-1].usage.completion_tokens, outs[-1].usage.cached_tokens) == (3, 4, 2)
    # Tokens after the finish (e.g. a speculative tail) are ignored.
    assert t.process([ids[5]], 2).token_ids == [] and t.num_tokens_seen == 4
