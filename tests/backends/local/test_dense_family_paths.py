"""The dense families added to the Llama layer, each through every engine path against
transformers' greedy tokens on a tiny random model: Qwen3 (per-head q/k RMSNorm, head_dim 32 !=
hidden / heads, tied embeddings), Phi-3 (q/k/v and gate/up stored fused, untied head) and Phi-3 as
Phi-4-mini sets it up (partial_rotary_factor 0.75, tied embeddings). Paths:
the torch reference, the native per-op kernels, the native layer stack, `fairgate quantize` int8 /
int4 folders (against transformers on the dequantized weights), prefix caching, preemption, and
speculative decoding with a same-family draft (bit-identical to plain greedy). The Triton path is
in tests/kernels/test_engine_kernel_paths.py, the quantized KV cache in test_kv_cache_quant.py,
Phi-3's longrope past its original context in test_rope_scaling.py."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from fairgate.backends.local.model.config import ModelConfig, ModelConfigError
from fairgate.backends.local.model.loader import load_weights
from fairgate.backends.local.model.rope import cos_sin_cache, rotary_row_order
from fairgate.backends.local.model.runner import ModelRunner
from tests.backends.local.paged_driver import PagedDriver
from tests.backends.local.test_spec_engine import mixed_requests, run_both
from tests.helpers import hf_parity
from tests.helpers.hf_parity import check_prefix_cache_hits, hf_greedy, hf_model
from tests.helpers.tiny_models import make_tiny_model

transformers = pytest.importorskip("transformers")


_hf, _hf_greedy = hf_model, hf_greedy
FAMILIES = ("qwen3", "phi3", "phi3_partial")


def _prompts(vocab: int, count: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(3, vocab) for _ in range(rng.randint(1, 40))] for _ in range(count)]


@pytest.fixture(scope="module", params=FAMILIES)
def family_dir(request: pytest.FixtureRequest) -> Path:
    """The session's tiny folder of each family (tests/conftest.py)."""
    folder: Path = request.getfixturevalue(f"tiny_{request.param}_dir")
    return folder


@pytest.fixture(scope="module")
def hf_family(family_dir: Path):
    return _hf(family_dir)


def test_the_config_reads_qwen3() -> None:
    base = dict(model_type="qwen3", vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, head_dim=32)
    cfg = ModelConfig.from_dict(base)
    assert (cfg.qk_norm, cfg.head_dim, cfg.q_size, cfg.qkv_bias, cfg.o_bias) == (True, 32, 128, False, False)
    biased = ModelConfig.from_dict(dict(base, attention_bias=True))
    assert biased.qkv_bias and biased.o_bias  # Qwen3's attention_bias covers q, k, v and o
    assert not ModelConfig.from_dict(dict(base, model_type="qwen2")).qk_norm


def test_the_config_reads_phi3(tiny_phi3_dir: Path) -> None:
    cfg = ModelConfig.from_dir(tiny_phi3_dir)
    assert (cfg.model_type, cfg.qk_norm, cfg.qkv_bias, cfg.tie_word_embeddings, cfg.max_model_len) == (
        "phi3", False, False, False, 512)
    # Phi-3-mini-4k's window (2047 of 4096) caps the context as Mistral's does; the 128k model's
    # (262144) does not
    mini = dict(model_type="phi3", vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, max_position_embeddings=4096, sliding_window=2047)
    assert ModelConfig.from_dict(mini).max_model_len == 2047
    assert ModelConfig.from_dict(dict(mini, max_position_embeddings=131072, sliding_window=262144)).max_model_len == 131072
    assert ModelConfig.from_dict(dict(mini, partial_rotary_factor=0.75)).rotary_dim == 12  # Phi-4-mini's share
    with pytest.raises(ModelConfigError, match="7 of 16 head dims"):
        ModelConfig.from_dict(dict(mini, partial_rotary_factor=0.4375))
    with pytest.raises(ModelConfigError, match="only phi3's partial rotary"):  # other families lay it out otherwise
        ModelConfig.from_dict(dict(mini, model_type="llama", partial_rotary_factor=0.75))


def test_partial_rotary_reorders_each_q_and_k_head_and_keeps_the_passed_dims_still(tiny_phi3_partial_dir: Path) -> None:
    """rope.py: each q/k head's rotated pairs (i, i + 6) move to (i, i + 8), the 4 passed dims to
    the halves' last two places; the table turns those by nothing (cos 1, sin 0); v stays."""
    cfg = ModelConfig.from_dir(tiny_phi3_partial_dir)
    order = rotary_row_order(cfg)
    assert order is not None and order[:16].tolist() == [0, 1, 2, 3, 4, 5, 12, 13, 6, 7, 8, 9, 10, 11, 14, 15]
    assert order[16:32].tolist() == [16 + i for i in order[:16].tolist()]  # the next head alike
    assert order[-cfg.kv_size:].tolist() == list(range(96, 128))  # 4 q + 2 k heads of 16, then v
    table = cos_sin_cache(cfg, 40, torch.float32, torch.device("cpu"))  # [P, 2, D]
    passed = [6, 7, 14, 15]
    assert torch.equal(table[:, 0, passed], torch.ones(40, 4)) and torch.equal(table[:, 1, passed], torch.zeros(40, 4))
    assert not torch.equal(table[5, 0, :6], torch.ones(6))


def test_phi3_fused_projections_load_as_stored(tiny_phi3_dir: Path) -> None:
    """[q; k; v] and [gate; up] are the engine's own fused layouts: the tensors load unchanged."""
    cfg = ModelConfig.from_dir(tiny_phi3_dir)
    state = load_weights(tiny_phi3_dir, cfg, torch.float32)
    with safe_open(str(tiny_phi3_dir / "model.safetensors"), framework="pt") as f:
        for ours, theirs in (("attn.qkv_proj", "self_attn.qkv_proj"), ("mlp.gate_up_proj", "mlp.gate_up_proj")):
            assert torch.equal(state[f"layers.1.{ours}.weight"], f.get_tensor(f"model.layers.1.{theirs}.weight"))
    assert state["layers.0.attn.qkv_proj.weight"].shape == (cfg.q_size + 2 * cfg.kv_size, cfg.hidden_size)


@pytest.mark.parametrize("path", ["reference", "native-per-op", "native-stack"])
def test_greedy_matches_transformers_on_each_cpu_path(path: str, family_dir: Path, hf_family,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRGATE_KERNELS", "reference" if path == "reference" else "auto")
    runner = ModelRunner(family_dir, num_kv_blocks=160)
    native = runner.kernels.choice("fused").impl == "native"
    if path != "reference" and not native:
        pytest.skip("the native CPU kernels did not build here")
    assert (runner.model.native_stack is not None) == (path == "native-stack") or path == "native-per-op"
    if path == "native-per-op":
        runner.model.native_stack = None  # the per-op layers on the native kernels
    prompts = _prompts(runner.config.vocab_size, 12, seed=11)
    max_new = [random.Random(i).randint(4, 16) for i in range(12)]
    expected = [_hf_greedy(hf_family, p, n) for p, n in zip(prompts, max_new, strict=True)]
    assert sum(map(len, expected)) >= 60  # not a run of early EOS
    assert PagedDriver(runner, chunk=5, seed=2).generate(prompts, max_new, stagger=2) == expected


def test_attention_bias_and_untied_head_match_transformers(tmp_path: Path) -> None:
    """The other Qwen3 switches: q/k/v/o biases (attention_bias) and an untied LM head, GQA 4:1."""
    folder = make_tiny_model(tmp_path / "biased", "qwen3", seed=4, attention_bias=True, tie_word_embeddings=False,
                             num_key_value_heads=1)
    runner = ModelRunner(folder, num_kv_blocks=96)
    assert runner.config.o_bias and runner.config.qkv_bias and not runner.config.tie_word_embeddings
    hf = _hf(folder)
    prompts = _prompts(runner.config.vocab_size, 6, seed=8)
    expected = [_hf_greedy(hf, p, 12) for p in prompts]
    assert PagedDriver(runner, chunk=6, seed=4).generate(prompts, 12, stagger=2) == expected


@pytest.mark.parametrize("method", ["int8", "int4-g32"])
def test_a_quantized_folder_matches_transformers_on_its_dequantized_weights(
        method: str, family_dir: Path, tmp_path: Path) -> None:
    runner, hf = hf_parity.quantized_pair(family_dir, tmp_path / method, method)
    assert runner.quantization_name == method
    prompts = _prompts(runner.config.vocab_size, 6, seed=3)
    expected = [_hf_greedy(hf, p, 10) for p in prompts]
    assert PagedDriver(runner, chunk=7, seed=1).generate(prompts, 10) == expected


async def test_prefix_cache_hits_give_transformers_tokens(family_dir: Path, hf_family) -> None:
    await check_prefix_cache_hits(family_dir, lambda prompt, n: _hf_greedy(hf_family, prompt, n))


def test_preemption_and_recompute_give_transformers_tokens(family_dir: Path, hf_family) -> None:
    hf_parity.check_preemption_recompute(family_dir, lambda prompt, n: _hf_greedy(hf_family, prompt, n))


@pytest.fixture(scope="module")
def family_draft_dir(family_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-layer random model of the target's family with its tokenizer: a poor draft."""
    arch = ModelConfig.from_dir(family_dir).model_type
    return make_tiny_model(tmp_path_factory.mktemp(f"{arch}-draft"), arch, seed=7, num_hidden_layers=1)


@pytest.mark.parametrize("draft", ["self", "poor"])
def test_speculative_greedy_with_a_same_family_draft_is_identical(draft: str, family_dir: Path,
                                                                  family_draft_dir: Path) -> None:
    folder = family_dir if draft == "self" else family_draft_dir
    core = run_both(family_dir, f"draft:{folder}", mixed_requests())
    s = core.stats
    assert s.spec_drafts > 0
    if draft == "self":  # the target as its own draft: every guess is right
        assert s.spec_accepted_tokens == s.spec_draft_tokens
    else:
        assert s.spec_accepted_tokens < s.spec_draft_tokens
    assert core.speculator.proposer.kv.check_pool_whole()


def test_speculative_greedy_through_preemption_with_a_same_family_draft(family_dir: Path) -> None:
    core = run_both(family_dir, f"draft:{family_dir}", mixed_requests(30), num_kv_blocks=24)
    assert core.scheduler.num_preemptions > 0 and core.stats.spec_accepted_tokens > 0
