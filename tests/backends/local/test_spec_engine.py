"""Speculative decoding in the engine: greedy output bit-identical to the plain engine.

Each test runs the same requests through a plain `EngineCore` and a speculating one (n-gram
lookup, the target as its own draft, or another random model as a poor draft) and compares
every token, the text and the finish reason; then checks both KV pools are whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from fairgate.backends.local.engine.config import EngineConfig
from fairgate.backends.local.engine.core import EngineCore
from fairgate.backends.local.engine.factory import build_engine_parts
from fairgate.backends.local.engine.output import OutputTracker
from fairgate.backends.local.engine.types import SamplingParams
from fairgate.scheduler.queue import FCFSQueue
from fairgate.scheduler.request import SchedRequest
from tests.helpers.tiny_models import make_tiny_model

# Repetitive prompts, so n-gram lookup finds matches; different lengths so blocks differ.
PROMPTS = [
    [5, 6, 7, 8, 9, 10, 11] * 4,
    list(range(30, 70)),
    [3, 4, 3, 4, 3, 4, 100, 101, 102, 3, 4],
    [200, 201, 202, 203] * 6 + [7],
]


@pytest.fixture(scope="module")
def poor_draft_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another random tiny model with the same tokenizer: it mostly disagrees with the target."""
    return make_tiny_model(tmp_path_factory.mktemp("tiny-draft"), "llama", seed=7)


@dataclass(slots=True)
class Result:
    token_ids: list[int]
    text: str
    finish_reason: str | None


def engine(model: Path, speculative: str = "off", **cfg) -> EngineCore:
    cfg.setdefault("num_kv_blocks", 64)
    cfg.setdefault("block_size", 4)
    # Not adaptive: every decode drafts the cap, whatever this machine's timings say.
    config = EngineConfig(str(model), speculative=speculative, speculative_adaptive=False, **cfg)
    parts = build_engine_parts(config, wait_queue=FCFSQueue())
    core = EngineCore(parts)
    core.tokenizer = parts.tokenizer  # for the trackers' decoders
    return core


def add(core: EngineCore, rid: str, prompt: list[int], sampling: SamplingParams) -> None:
    decoder = core_tokenizer(core).detokenizer(prompt)
    tracker = OutputTracker(rid, sampling, len(prompt), sampling.max_tokens, frozenset([1]), decoder)
    core.add(SchedRequest(rid, list(prompt), sampling.max_tokens), tracker)


def core_tokenizer(core: EngineCore):
    return core.tokenizer


def drain(core: EngineCore, results: dict[str, Result] | None = None, on_step=None) -> dict[str, Result]:
    results = {} if results is None else results
    for _ in range(2000):
        if not core.has_unfinished:
            break
        for out in core.step().outputs:
            r = results.setdefault(out.request_id, Result([], "", None))
            r.token_ids += out.token_ids
            r.text += out.text
            r.finish_reason = out.finish_reason
        if on_step is not None:
            on_step(core)
    assert not core.has_unfinished
    return results


def greedy(max_tokens: int = 24, **kw) -> SamplingParams:
    return SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True, **kw)


def run_both(model: Path, speculative: str, requests: list[tuple[str, list[int], SamplingParams]], **cfg):
    outs = []
    cores = []
    for spec in ("off", speculative):
        core = engine(model, spec, **cfg)
        for rid, prompt, sampling in requests:
            add(core, rid, prompt, sampling)
        outs.append(drain(core, on_step=check_cache_holds_only_verified_tokens))
        assert core.scheduler.kv.check_pool_whole()
        cores.append(core)
    assert outs[0] == outs[1]
    return cores[1]


def check_cache_holds_only_verified_tokens(core: EngineCore) -> None:
    bm = core.scheduler.kv
    for r in core.scheduler.running:
        tokens = r.all_token_ids
        for i, block in enumerate(bm.block_table(r.request_id)):
            cached = bm.cached_tokens_of(block)
            if cached is not None:
                assert (i + 1) * bm.block_size <= r.num_computed_tokens
                assert cached == tuple(tokens[i * bm.block_size : (i + 1) * bm.block_size])


def mixed_requests(max_tokens: int = 24) -> list[tuple[str, list[int], SamplingParams]]:
    # every other request opts out: speculating and plain decodes share each step
    return [
        (f"r{i}", p, greedy(max_tokens, speculative=i % 2 == 0)) for i, p in enumerate(PROMPTS)
    ]


def spec_of(kind: str, tiny_model_dir: Path, poor_draft_dir: Path) -> str:
    return {"ngram": "ngram", "self": f"draft:{tiny_model_dir}", "poor": f"draft:{poor_draft_dir}"}[kind]


@pytest.mark.parametrize("kind", ["ngram", "self", "poor"])
def test_greedy_is_identical_in_mixed_batches(kind: str, tiny_model_dir: Path, poor_draft_dir: Path) -> None:
    core = run_both(tiny_model_dir, spec_of(kind, tiny_model_dir, poor_draft_dir), mixed_requests())
    s = core.stats
    assert s.spec_drafts > 0 and s.spec_draft_tokens >= s.spec_drafts
    if kind == "self":  # the target as its own draft: every guess is right
        assert s.spec_accepted_tokens == s.spec_draft_tokens
    if kind == "poor":
        assert s.spec_accepted_tokens < s.spec_draft_tokens
    assert sum(s.spec_accepted_by_position) == s.spec_accepted_tokens
    if kind != "ngram":
        assert core.speculator.proposer.kv.check_pool_whole()  # draft KV freed on finish


@pytest.mark.parametrize("kind", ["ngram", "poor"])
def test_greedy_is_identical_with_chunked_prefill(kind: str, tiny_model_dir: Path, poor_draft_dir: Path) -> None:
    # 8 tokens a step: prompts arrive in chunks next to verifies, and drafts get trimmed
    core = run_both(
        tiny_model_dir, spec_of(kind, tiny_model_dir, poor_draft_dir), mixed_requests(), max_num_batched_tokens=8
    )
    assert core.stats.spec_drafts > 0


def test_greedy_is_identical_with_prefix_cache_hits(tiny_model_dir: Path) -> None:
    prompt = PROMPTS[0]
    for spec in ("off", "ngram"):
        core = engine(tiny_model_dir, spec)
        add(core, "first", prompt, greedy(20))
        first = drain(core, on_step=check_cache_holds_only_verified_tokens)
        add(core, "again", prompt + first["first"].token_ids[:9], greedy(20))
        again = drain(core, on_step=check_cache_holds_only_verified_tokens)
        if spec == "off":
            plain = (first, again)
        assert core.scheduler.kv.prefix_cache_hits >= 28  # the prompt's 7 full blocks at least
    assert (first, again) == plain and core.stats.spec_accepted_tokens > 0


@pytest.mark.parametrize("kind", ["ngram", "self"])
def test_greedy_is_identical_through_preemption_and_recompute(
    kind: str, tiny_model_dir: Path, poor_draft_dir: Path
) -> None:
    # 24 blocks of 4 tokens cannot hold four sequences of ~60 tokens: requests get preempted
    core = run_both(
        tiny_model_dir, spec_of(kind, tiny_model_dir, poor_draft_dir), mixed_requests(30), num_kv_blocks=24
    )
    assert core.scheduler.num_preemptions > 0 and core.stats.spec_accepted_tokens > 0


def test_an_abort_mid_draft_frees_both_kv_pools(tiny_model_dir: Path) -> None:
    core = engine(tiny_model_dir, f"draft:{tiny_model_dir}")
    for rid, prompt, sampling in mixed_requests(40):
        add(core, rid, prompt, sampling)
    while not core.scheduler.requests["r0"].spec_token_ids:
        core.step()
    out = core.abort("r0")  # drafts proposed, not yet verified
    assert out is not None and out.finish_reason == "abort"
    drain(core)
    assert core.scheduler.kv.check_pool_whole() and core.speculator.proposer.kv.check_pool_whole()


def test_a_stop_string_inside_an_accepted_draft_cuts_the_output_there(tiny_model_dir: Path) -> None:
    prompt = PROMPTS[1]
    plain = engine(tiny_model_dir)
    add(plain, "p", prompt, greedy(30))
    full = drain(plain)["p"]
    stop = full.text[len(full.text) // 2 :][:3]  # some text the greedy output reaches
    assert stop.strip()
    results = []
    for spec in ("off", f"draft:{tiny_model_dir}"):
        core = engine(tiny_model_dir, spec, num_speculative_tokens=6)
        add(core, "p", prompt, greedy(30, stop=[stop]))
        results.append(drain(core)["p"])
    assert results[0] == results[1] and results[1].finish_reason == "stop"
    assert stop not in results[1].text and len(results[1].token_ids) < 30
    assert core.stats.spec_accepted_tokens == core.stats.spec_draft_tokens > 0  # self-draft: all kept


@pytest.mark.parametrize("max_tokens", [2, 5, 9, 13])
def test_max_tokens_inside_a_draft_stops_exactly_there(max_tokens: int, tiny_model_dir: Path) -> None:
    core = run_both(tiny_model_dir, f"draft:{tiny_model_dir}", [("a", PROMPTS[2], greedy(max_tokens))])
    assert core.stats.generation_tokens == max_tokens


def test_the_tracker_drops_tokens_after_a_stop_inside_one_verify() -> None:
    sampling = SamplingParams(max_tokens=10, stop_token_ids=[42])
    t = OutputTracker("a", sampling, 3, 10, frozenset(), None)
    out = t.process([5, 42, 6, 7], 0)
    assert out.token_ids == [5, 42] and out.finish_reason == "stop" and out.usage.completion_tokens == 2
    t = OutputTracker("b", SamplingParams(max_tokens=3), 3, 3, frozenset(), None)
    assert t.process([1], 0).token_ids == [1]
    out = t.process([2, 3, 4, 5], 0)
    assert out.token_ids == [2, 3] and out.finish_reason == "length" and out.usage.completion_tokens == 3


def test_sampled_requests_speculate_and_an_opted_out_seeded_one_reproduces_the_plain_engine(
    tiny_model_dir: Path,
) -> None:
    def sampled(seed: int, speculative: bool) -> SamplingParams:
        return SamplingParams(max_tokens=20, temperature=0.7, top_p=0.9, seed=seed, ignore_eos=True,
                              speculative=speculative)

    requests = [(f"s{i}", p, sampled(i, speculative=i != 0)) for i, p in enumerate(PROMPTS)]
    outs = []
    for spec in ("off", f"draft:{tiny_model_dir}"):
        core = engine(tiny_model_dir, spec)
        for rid, prompt, sampling in requests:
            add(core, rid, prompt, sampling)
        outs.append(drain(core))
        assert core.scheduler.kv.check_pool_whole()
    assert all(len(r.token_ids) == 20 for r in outs[1].values())
    assert outs[0]["s0"] == outs[1]["s0"]  # opted out: the seed's own stream, as in the plain engine
    # the target as its own draft: p == q, so every draft is accepted with probability p(x)
    assert core.stats.spec_drafts > 0 and core.stats.spec_accepted_tokens > 0
    assert core.speculator.proposer.kv.check_pool_whole()
