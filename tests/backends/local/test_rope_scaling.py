"""RoPE scaling `yarn` and `longrope` against transformers: the frequencies and attention factor
against modeling_rope_utils itself, then tiny random Llama / Qwen2 / Qwen3 / Phi-3 (whole and partial rotary) models whose original
context (32) is far shorter than the prompts (up to 130 tokens): prompt logits, and greedy tokens
through the torch reference and the native per-op kernels and layer stack, prefilled in chunks."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import torch

from fairgate.backends.local.engine.types import RunnerInput, SamplingParams
from fairgate.backends.local.model.config import ModelConfig
from fairgate.backends.local.model.rope import attention_factor, inv_frequencies, table_rows
from fairgate.backends.local.model.runner import ModelRunner
from tests.backends.local.paged_driver import PagedDriver
from tests.helpers.tiny_models import make_tiny_model

transformers = pytest.importorskip("transformers")
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402

HALF = 8  # head_dim 16 in the tiny llama and qwen2, 32 in qwen3 (the factors are cut per arch)
SCALINGS: dict[str, dict[str, Any]] = {
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32},
    "yarn-deepseek": {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 32, "mscale": 1.0,
                      "mscale_all_dim": 0.8, "beta_fast": 16, "beta_slow": 2},
    "longrope": {"rope_type": "longrope", "original_max_position_embeddings": 32},  # factors per arch
}


def _scaling(name: str, head_dim: int) -> dict[str, Any]:
    scaling = dict(SCALINGS[name])
    if scaling["rope_type"] == "longrope":
        rng = random.Random(head_dim)
        scaling["short_factor"] = [round(1 + rng.random(), 3) for _ in range(head_dim // 2)]
        scaling["long_factor"] = [round(1 + 9 * rng.random(), 3) for _ in range(head_dim // 2)]
    return scaling


def _folder(tmp_path_factory: pytest.TempPathFactory, arch: str, name: str) -> Path:
    rotary = 32 if arch == "qwen3" else 12 if arch == "phi3-partial" else 16
    # Phi-3 keeps original_max_position_embeddings at the top level, where it wins over the block's;
    # Phi-4-mini rotates 3/4 of each head (its factors cover those dims only)
    top: dict[str, Any] = {"original_max_position_embeddings": 32} if arch.startswith("phi3") else {}
    if arch == "phi3-partial":
        top["partial_rotary_factor"] = 0.75
    return make_tiny_model(tmp_path_factory.mktemp(f"{arch}-{name}"), arch.removesuffix("-partial"), seed=5,
                           max_position_embeddings=256, rope_scaling=_scaling(name, rotary), **top)


def _hf(folder: Path):
    return transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


@pytest.mark.parametrize("name", list(SCALINGS))
def test_frequencies_and_attention_factor_are_transformers(name: str, tmp_path: Path) -> None:
    folder = _folder_cfg(tmp_path, name)
    hf_cfg = transformers.AutoConfig.from_pretrained(folder)
    cfg = ModelConfig.from_dir(folder)
    short, factor = ROPE_INIT_FUNCTIONS[cfg.rope.rope_type](hf_cfg, "cpu")
    assert torch.equal(inv_frequencies(cfg), short) and attention_factor(cfg) == pytest.approx(factor, abs=0)
    if cfg.rope.rope_type == "longrope":
        long, _ = ROPE_INIT_FUNCTIONS["longrope"](hf_cfg, "cpu", seq_len=33)
        assert torch.equal(inv_frequencies(cfg, long=True), long) and not torch.equal(long, short)
    else:
        assert factor > 1.0  # the factor is really exercised


def _folder_cfg(tmp_path: Path, name: str) -> Path:
    """A config.json only (no weights): enough for the frequency comparison."""
    from tests.helpers.tiny_models import _arch_config

    cfg = _arch_config("llama", 512, 1, 2, dict(max_position_embeddings=256, rope_scaling=_scaling(name, 16)))
    cfg.save_pretrained(tmp_path)
    return tmp_path


ARCHES = ["llama", "qwen2", "qwen3"]
# Phi3Config knows longrope only (it renames "su" and "yarn" to it)
SCALED = [(a, n) for a in ARCHES for n in ("yarn", "longrope")] + [("phi3", "longrope"), ("phi3-partial", "longrope")]


@pytest.fixture(scope="module", params=SCALED,
                ids=lambda p: f"{p[0]}-{p[1]}")
def scaled(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    arch, name = request.param
    folder = _folder(tmp_path_factory, arch, name)
    return folder, _hf(folder)


def test_prompt_logits_past_the_original_context_match(scaled) -> None:
    folder, hf = scaled
    runner = ModelRunner(folder, num_kv_blocks=32)
    for length in (20, 120):  # within the original 32 (longrope's short set), and far past it
        prompt = [random.Random(length).randrange(3, 500) for _ in range(length)]
        with torch.no_grad():
            ref = hf(torch.tensor([prompt])).logits[0]  # [T, V]
        table = list(range(31, 31 - (length + 15) // 16, -1))
        (ours,) = runner.forward_logits([RunnerInput("a", prompt, 0, table, False, SamplingParams(),
                                                     prompt_token_ids=prompt)])
        torch.testing.assert_close(ours, ref, atol=1e-4, rtol=1e-4)


def _hf_greedy(hf, prompt: list[int], max_new: int) -> list[int]:
    with torch.no_grad():
        out = hf.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                          do_sample=False, max_new_tokens=max_new, pad_token_id=hf.config.eos_token_id)
    return out[0, len(prompt):].tolist()


@pytest.mark.parametrize("path", ["reference", "native-per-op", "native-stack"])
def test_greedy_past_the_original_context_matches_on_each_cpu_path(path: str, scaled,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    folder, hf = scaled
    monkeypatch.setenv("FAIRGATE_KERNELS", "reference" if path == "reference" else "auto")
    runner = ModelRunner(folder, num_kv_blocks=96)
    if path != "reference" and runner.kernels.choice("fused").impl != "native":
        pytest.skip("the native CPU kernels did not build here")
    if path == "native-stack":
        assert runner.model.native_stack is not None
    else:
        runner.model.native_stack = None
    rng = random.Random(3)
    # prompts within the original context that decode past it, and prompts far past it. Not for
    # Phi-3: transformers' Phi3ForCausalLM drops its cache when a sequence first passes the original
    # context and re-rotates every position by the long factors (prepare_inputs_for_generation);
    # the engine keeps the rows it cached (rope.py), so there its prompts stay on one side
    crossing = 20 if ModelConfig.from_dir(folder).model_type == "phi3" else 28
    prompts = [[rng.randrange(3, 500) for _ in range(n)] for n in (10, crossing, 100, 130)]
    expected = [_hf_greedy(hf, p, 12) for p in prompts]
    assert PagedDriver(runner, chunk=24, seed=2, stop_at_eos=False).generate(prompts, 12, stagger=2) == expected


def test_longrope_rows_follow_transformers_generate() -> None:
    # original context 32, a table of 2 x 64 rows: long rows are position + 64
    assert table_rows([0, 31, 32, 40], 128, 32, prompt_len=10) == [0, 31, 96, 104]  # decode past 32: long
    assert table_rows([0, 5, 99], 128, 32, prompt_len=100) == [64, 69, 163]  # a long prompt: all long
    assert table_rows([0, 5], 128, None, prompt_len=100) == [0, 5]  # other rope types: the position


async def test_longrope_prefix_caching_keeps_short_and_long_prompts_apart(tmp_path_factory) -> None:
    """A short prompt's cached blocks (short rotation) are not reused by a long prompt with the
    same first tokens (transformers rotates all of it long), but long prompts share theirs."""
    from fairgate.backends.local.engine.async_engine import AsyncEngine, EngineConfig

    folder = _folder(tmp_path_factory, "llama", "longrope")
    hf = _hf(folder)
    eng = AsyncEngine(EngineConfig(str(folder), enable_prefix_caching=True, num_kv_blocks=64,
                                   max_num_batched_tokens=24))
    try:
        rng = random.Random(2)
        system = [rng.randrange(3, 500) for _ in range(20)]  # one full block of 16
        greedy = SamplingParams(max_tokens=16, temperature=0.0, ignore_eos=True)
        long = system + [rng.randrange(3, 500) for _ in range(90)]
        prompts = [system + [7, 8, 9, 10], long, long[:96] + [11, 12, 13]]
        hits = []
        for prompt in prompts:  # the short one decodes past 32 too
            out = await eng.generate(prompt, greedy)
            assert out.token_ids == _hf_greedy(hf, prompt, 16)
            hits.append(eng.block_manager.prefix_cache_hits)
        assert hits[1] == hits[0] and hits[2] - hits[1] >= 96  # the long prompts share 6 blocks
    finally:
        await eng.aclose()


def test_longrope_preemption_and_recompute_give_transformers_tokens(tmp_path_factory) -> None:
    from tests.backends.local.test_spec_engine import add, drain, engine, greedy

    folder = _folder(tmp_path_factory, "qwen2", "longrope")
    hf = _hf(folder)
    core = engine(folder, num_kv_blocks=30)  # blocks of 4: requests get preempted
    rng = random.Random(5)
    prompts = [[rng.randrange(3, 500) for _ in range(n)] for n in (12, 20, 40, 25)]  # all decode past 32
    for i, prompt in enumerate(prompts):
        add(core, f"r{i}", prompt, greedy(30))
    results = drain(core)
    assert core.scheduler.num_preemptions > 0
    for i, prompt in enumerate(prompts):
        expected = _hf_greedy(hf, prompt, 30)  # transformers stops at EOS, the engine here does not
        assert results[f"r{i}"].token_ids[: len(expected)] == expected and len(expected) >= 8
