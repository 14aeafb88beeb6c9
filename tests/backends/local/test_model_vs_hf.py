"""The engine's model against transformers on real tiny checkpoints: logits and greedy tokens."""

from __future__ import annotations

import random

import pytest
import torch

from fairgate.backends.local.engine.types import RunnerInput, SamplingParams
from fairgate.backends.local.model.runner import ModelRunner
from tests.backends.local.paged_driver import PagedDriver

transformers = pytest.importorskip("transformers")

MODEL_FIXTURES = ["tiny_model_dir", "tiny_mistral_dir", "tiny_qwen2_dir", "tiny_llama3_dir", "tiny_qwen3_dir"]


@pytest.fixture(params=MODEL_FIXTURES)
def model_dir(request: pytest.FixtureRequest):
    return request.getfixturevalue(request.param)


def _hf(model_dir):
    return transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()


def _prompts(vocab: int, count: int, lo: int, hi: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(3, vocab) for _ in range(rng.randint(lo, hi))] for _ in range(count)]


def _hf_greedy(hf, prompt: list[int], max_new: int) -> list[int]:
    with torch.no_grad():
        out = hf.generate(
            torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
            do_sample=False, max_new_tokens=max_new, pad_token_id=hf.config.eos_token_id,
        )
    return out[0, len(prompt) :].tolist()


def test_prompt_logits_match_transformers(model_dir):
    runner = ModelRunner(model_dir, num_kv_blocks=32)
    hf = _hf(model_dir)
    prompt = _prompts(runner.config.vocab_size, 1, 70, 70)[0]
    with torch.no_grad():
        ref = hf(torch.tensor([prompt])).logits[0]  # [T, V]
    table = [17, 3, 25, 9, 11]  # 5 blocks of 16 cover 70 positions
    (ours,) = runner.forward_logits([RunnerInput("a", prompt, 0, table, False, SamplingParams())])
    assert ours.shape == ref.shape
    torch.testing.assert_close(ours, ref, atol=1e-4, rtol=1e-4)


def test_chunked_prefill_logits_match_transformers(tiny_llama3_dir):
    """Chunks of 7 (continuing from cached KV) and single tokens equal one full forward."""
    runner = ModelRunner(tiny_llama3_dir, num_kv_blocks=32)
    hf = _hf(tiny_llama3_dir)
    prompt = _prompts(runner.config.vocab_size, 1, 40, 40, seed=3)[0]
    with torch.no_grad():
        ref = hf(torch.tensor([prompt])).logits[0]
    table = [30, 2, 14]
    pieces = []
    for start, end in [(0, 7), (7, 14), (14, 15), (15, 33), (33, 34), (34, 40)]:
        inp = RunnerInput("a", prompt[start:end], start, table, False, SamplingParams())
        pieces.append(runner.forward_logits([inp])[0])
    torch.testing.assert_close(torch.cat(pieces), ref, atol=1e-4, rtol=1e-4)


def test_greedy_single_request_matches_generate(model_dir):
    runner = ModelRunner(model_dir, num_kv_blocks=64)
    hf = _hf(model_dir)
    prompt = _prompts(runner.config.vocab_size, 1, 23, 23, seed=5)[0]
    expected = _hf_greedy(hf, prompt, 24)
    (ours,) = PagedDriver(runner, chunk=64).generate([prompt], 24)
    assert ours == expected


def test_greedy_batched_chunked_matches_generate(model_dir):
    runner = ModelRunner(model_dir, num_kv_blocks=160)
    hf = _hf(model_dir)
    prompts = _prompts(runner.config.vocab_size, 16, 1, 40, seed=11)
    max_new = [random.Random(i).randint(4, 20) for i in range(16)]
    expected = [_hf_greedy(hf, p, n) for p, n in zip(prompts, max_new, strict=True)]
    driver = PagedDriver(runner, chunk=5, seed=2)
    ours = driver.generate(prompts, max_new, stagger=2)
    assert driver.max_batch >= 8  # really batched: prefill chunks beside other decodes
    assert ours == expected


def test_greedy_with_consecutive_blocks_matches_generate(tiny_model_dir):
    """In-order block ids: long prompts get consecutive runs (read in place by the CPU kernels)."""
    runner = ModelRunner(tiny_model_dir, num_kv_blocks=96, block_size=4)
    hf = _hf(tiny_model_dir)
    prompts = _prompts(runner.config.vocab_size, 6, 20, 60, seed=4)
    expected = [_hf_greedy(hf, p, 10) for p in prompts]
    assert PagedDriver(runner, chunk=64, seed=None).generate(prompts, 10, stagger=1) == expected


def test_llama3_rope_scaling_changes_the_model(tiny_llama3_dir):
    """Guard against the scaled-rope test passing vacuously: default rope gives other logits."""
    from fairgate.backends.local.model.rope import inv_frequencies

    runner = ModelRunner(tiny_llama3_dir, num_kv_blocks=8)
    cfg = runner.config
    assert cfg.rope.rope_type == "llama3"
    scaled = inv_frequencies(cfg)
    cfg.rope.rope_type = "default"
    assert not torch.allclose(scaled, inv_frequencies(cfg))
