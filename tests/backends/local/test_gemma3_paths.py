"""Gemma 3 text models (Gemma3ForCausalLM) against transformers on a tiny random gemma3_text:
embedding scale, (1 + w) norms, four norms a layer, q/k norms, GELU-tanh MLP, a query scale of
its own, and sliding-window layers (window 8) with their own RoPE base around a full layer; every
sequence here but the shortest is longer than the window. Through the torch reference and the
native per-op kernels (windowed layers on the reference), chunked and batched, with a quantized
KV cache, weight-only int8, prefix caching, preemption and speculative decoding."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from fairgate.backends.local.engine.types import RunnerInput, SamplingParams
from fairgate.backends.local.model.config import ModelConfig, ModelConfigError
from fairgate.backends.local.model.runner import ModelRunner
from tests.backends.local.paged_driver import PagedDriver
from tests.helpers import hf_parity
from tests.helpers.hf_parity import check_prefix_cache_hits, hf_greedy, hf_model
from tests.helpers.tiny_models import make_tiny_model

transformers = pytest.importorskip("transformers")


_hf, _hf_greedy = hf_model, hf_greedy


def _prompts(count: int, seed: int, lo: int = 3, hi: int = 40) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(3, 500) for _ in range(rng.randint(lo, hi))] for _ in range(count)]


@pytest.fixture(scope="module")
def gemma3_dir(tiny_gemma3_dir: Path) -> Path:
    return tiny_gemma3_dir


@pytest.fixture(scope="module")
def hf_gemma3(gemma3_dir: Path):
    return _hf(gemma3_dir)


def test_the_config_reads_gemma3(gemma3_dir: Path) -> None:
    cfg = ModelConfig.from_dir(gemma3_dir)
    assert cfg.layer_types == ("sliding_attention", "sliding_attention", "full_attention", "sliding_attention")
    assert [cfg.layer_window(i) for i in range(4)] == [8, 8, None, 8]
    assert (cfg.rope.theta, cfg.local_rope and cfg.local_rope.theta) == (10000.0, 100.0)
    assert cfg.attention_scale == 24**-0.5 and cfg.embed_scale == 8.0 and cfg.norm_offset == 1.0
    assert cfg.max_model_len == 512  # the window does not cap the context: those layers really window
    released = dict(model_type="gemma3_text", vocab_size=100, hidden_size=64, intermediate_size=128,
                    num_hidden_layers=12, num_attention_heads=4, num_key_value_heads=1, head_dim=256,
                    rope_theta=1e6, rope_local_base_freq=1e4, rope_scaling={"rope_type": "linear", "factor": 8.0},
                    sliding_window=512, sliding_window_pattern=6, query_pre_attn_scalar=256)
    old = ModelConfig.from_dict(released)  # the Hub's flat keys, as Gemma 3 4B ships them
    assert [i for i, t in enumerate(old.layer_types) if t == "full_attention"] == [5, 11]
    assert (old.rope.rope_type, old.rope.factor, old.local_rope and old.local_rope.rope_type) == (
        "linear", 8.0, "default")
    with pytest.raises(ModelConfigError, match="attn_logit_softcapping"):
        ModelConfig.from_dict(dict(released, attn_logit_softcapping=50.0))
    with pytest.raises(ModelConfigError, match="hidden_activation"):
        ModelConfig.from_dict(dict(released, hidden_activation="relu"))


@pytest.mark.parametrize("path", ["reference", "native-per-op"])
def test_prompt_logits_match_transformers(path: str, gemma3_dir: Path, hf_gemma3,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRGATE_KERNELS", "reference" if path == "reference" else "auto")
    runner = ModelRunner(gemma3_dir, num_kv_blocks=32)
    assert runner.model.native_stack is None  # gemma3 layers run per op
    for length in (5, 70):  # inside the window of 8, and far past it
        prompt = _prompts(1, length, length, length)[0]
        with torch.no_grad():
            ref = hf_gemma3(torch.tensor([prompt])).logits[0]  # [T, V]
        table = [17, 3, 25, 9, 11][: (length + 15) // 16]
        (ours,) = runner.forward_logits([RunnerInput("a", prompt, 0, table, False, SamplingParams(),
                                                     prompt_token_ids=prompt)])
        torch.testing.assert_close(ours, ref, atol=1e-4, rtol=1e-4)
    for layer in runner.model.layers:  # the window is what makes it match: without it, no match
        layer.attn.window = None  # type: ignore[union-attr]
    (unwindowed,) = runner.forward_logits([RunnerInput("a", prompt, 0, table, False, SamplingParams())])
    assert not torch.allclose(unwindowed[8:], ref[8:], atol=1e-2) and torch.allclose(unwindowed[:8], ref[:8], atol=1e-4)


def test_final_logit_softcapping_matches_transformers(tmp_path: Path) -> None:
    folder = make_tiny_model(tmp_path / "capped", "gemma3", seed=2, final_logit_softcapping=3.0, num_key_value_heads=1)
    runner, hf = ModelRunner(folder, num_kv_blocks=32), _hf(folder)
    prompt = _prompts(1, 4, 30, 30)[0]
    with torch.no_grad():
        ref = hf(torch.tensor([prompt])).logits[0]
    (ours,) = runner.forward_logits([RunnerInput("a", prompt, 0, [4, 2], False, SamplingParams())])
    assert ref.abs().max() <= 3.0 and ref.abs().max() > 2.0  # the cap is really at work
    torch.testing.assert_close(ours, ref, atol=1e-4, rtol=1e-4)
    expected = [_hf_greedy(hf, p, 10) for p in _prompts(4, seed=6)]
    assert PagedDriver(runner, chunk=7, seed=3).generate(_prompts(4, seed=6), 10) == expected


@pytest.mark.parametrize("path", ["reference", "native-per-op"])
def test_greedy_matches_transformers_chunked_and_batched(path: str, gemma3_dir: Path, hf_gemma3,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRGATE_KERNELS", "reference" if path == "reference" else "auto")
    runner = ModelRunner(gemma3_dir, num_kv_blocks=160)
    if path != "reference" and runner.kernels.choice("fused").impl != "native":
        pytest.skip("the native CPU kernels did not build here")
    prompts = _prompts(10, seed=11)
    max_new = [random.Random(i).randint(6, 20) for i in range(10)]
    expected = [_hf_greedy(hf_gemma3, p, n) for p, n in zip(prompts, max_new, strict=True)]
    assert sum(map(len, expected)) >= 60  # not a run of early EOS
    assert PagedDriver(runner, chunk=5, seed=2).generate(prompts, max_new, stagger=2) == expected


def test_an_int8_kv_cache_keeps_the_windowed_greedy_tokens(gemma3_dir: Path) -> None:
    """The quantized KV cache through the windowed (reference) and full attention: the same
    greedy tokens as the float32 cache on prompts past the window (as test_kv_cache_quant)."""
    prompts = _prompts(6, seed=5, lo=12, hi=40)
    outs = {kv: PagedDriver(ModelRunner(gemma3_dir, block_size=8, num_kv_blocks=60, kv_cache_dtype=kv), chunk=7,
                            seed=3, stop_at_eos=False).generate(prompts, 8) for kv in (None, "int8")}
    assert [o[:4] for o in outs["int8"]] == [o[:4] for o in outs[None]]


@pytest.mark.parametrize("method", ["int8", "int4-g32"])
def test_a_quantized_folder_matches_transformers_on_its_dequantized_weights(method: str, gemma3_dir: Path,
                                                                            tmp_path: Path) -> None:
    runner, hf = hf_parity.quantized_pair(gemma3_dir, tmp_path / method, method)
    assert runner.quantization_name == method
    prompts = _prompts(5, seed=3)
    expected = [_hf_greedy(hf, p, 10) for p in prompts]
    assert PagedDriver(runner, chunk=7, seed=1).generate(prompts, 10) == expected


async def test_prefix_cache_hits_give_transformers_tokens(gemma3_dir: Path, hf_gemma3) -> None:
    await check_prefix_cache_hits(gemma3_dir, lambda prompt, n: _hf_greedy(hf_gemma3, prompt, n))


def test_preemption_and_recompute_give_transformers_tokens(gemma3_dir: Path, hf_gemma3) -> None:
    hf_parity.check_preemption_recompute(gemma3_dir, lambda prompt, n: _hf_greedy(hf_gemma3, prompt, n))


@pytest.mark.parametrize("draft", ["self", "ngram"])
def test_speculative_greedy_on_gemma3_is_identical(draft: str, gemma3_dir: Path) -> None:
    """A gemma3 target verifying drafts, and a gemma3 draft (its rounds through its own model:
    no native draft round takes these layers): the same tokens as plain greedy."""
    from tests.backends.local.test_spec_engine import mixed_requests, run_both

    core = run_both(gemma3_dir, f"draft:{gemma3_dir}" if draft == "self" else "ngram", mixed_requests())
    s = core.stats
    assert s.spec_drafts > 0
    if draft == "self":
        assert s.spec_accepted_tokens == s.spec_draft_tokens
