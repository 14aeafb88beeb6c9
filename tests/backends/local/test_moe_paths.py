"""Mixture-of-experts (Mixtral, Qwen3-MoE) through every engine path that takes it, each against
transformers' greedy tokens on tiny random models: Mixtral (8 experts top-2, renormalised, every
layer sparse) and Qwen3-MoE (6 experts top-2 without renormalisation, q/k norms, layer 1 of 3
dense). Paths: the torch reference, the native per-op kernels (packed expert linears), int8 /
int4 weights (a `fairgate quantize` folder and `--quantization int8` on load, against
transformers on the dequantized weights), prefix caching, preemption, and speculative decoding
with an MoE draft and with a dense draft (bit-identical to plain greedy). The native whole-model
programs refuse MoE (the plan says why) and the model runs per op."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from fairgate.backends.local.model.config import ModelConfig, ModelConfigError
from fairgate.backends.local.model.moe import SparseMoeBlock
from fairgate.backends.local.model.quantization import quantize_folder
from fairgate.backends.local.model.runner import ModelRunner
from fairgate.kernels import KernelPlan, QuantMethod, quantize_weight
from fairgate.kernels.ops.quant_format import dequantize_weight
from tests.backends.local import test_evaluation as evaluation
from tests.backends.local.paged_driver import PagedDriver
from tests.backends.local.test_spec_engine import (
    PROMPTS,
    add,
    drain,
    engine,
    greedy,
    mixed_requests,
    run_both,
)
from tests.helpers.hf_parity import check_prefix_cache_hits, hf_greedy, hf_model
from tests.helpers.tiny_models import make_tiny_model

transformers = pytest.importorskip("transformers")

ARCHS = ("mixtral", "qwen3_moe")


@pytest.fixture(scope="module")
def moe_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {arch: make_tiny_model(tmp_path_factory.mktemp(f"tiny-{arch}"), arch) for arch in ARCHS}


@pytest.fixture(scope="module")
def hf_models(moe_dirs: dict[str, Path]) -> dict[str, object]:
    return {arch: _hf(folder) for arch, folder in moe_dirs.items()}


_hf, _hf_greedy = hf_model, hf_greedy


def _hf_greedy_past_eos(hf, prompt: list[int], max_new: int) -> list[int]:
    """transformers' greedy tokens as an ignore_eos request gets them (generate stops at EOS)."""
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(max_new):
            ids.append(int(hf(torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(prompt):]


def _prompts(vocab: int, count: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(3, vocab) for _ in range(rng.randint(1, 40))] for _ in range(count)]


def test_the_config_reads_both_moe_families() -> None:
    base = dict(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
                num_key_value_heads=2, num_experts_per_tok=2)
    mix = ModelConfig.from_dict(dict(base, model_type="mixtral", num_local_experts=8, sliding_window=4096))
    assert mix.moe is not None and not mix.qk_norm and mix.sliding_window == 4096
    assert (mix.moe.num_experts, mix.moe.top_k, mix.moe.intermediate_size, mix.moe.norm_topk_prob) == (8, 2, 128, True)
    assert mix.moe.sparse_layers == {0, 1, 2, 3}
    qwen = ModelConfig.from_dict(dict(base, model_type="qwen3_moe", num_experts=6, moe_intermediate_size=32,
                                      norm_topk_prob=True, decoder_sparse_step=2, mlp_only_layers=[3]))
    assert qwen.moe is not None and qwen.qk_norm
    assert (qwen.moe.num_experts, qwen.moe.intermediate_size, qwen.moe.norm_topk_prob) == (6, 32, True)
    assert qwen.moe.sparse_layers == {1}  # (i + 1) % 2 == 0 gives 1 and 3; 3 is mlp_only
    with pytest.raises(ModelConfigError, match="unsupported model_type 'qwen2_moe'"):
        ModelConfig.from_dict(dict(base, model_type="qwen2_moe"))  # shared experts: not built


@pytest.mark.parametrize("norm", [True, False])
def test_grouped_experts_equal_every_expert_on_every_token(norm: bool) -> None:
    """Running only the routed rows, grouped by expert, gives what a dense loop over all experts
    weighted by the (renormalised) top-k softmax gives."""
    cfg = ModelConfig.from_dict(dict(model_type="qwen3_moe", vocab_size=10, hidden_size=16, intermediate_size=8,
                                     num_hidden_layers=1, num_attention_heads=2, num_experts=5,
                                     num_experts_per_tok=2, moe_intermediate_size=12, norm_topk_prob=norm))
    torch.manual_seed(0)
    block = SparseMoeBlock(cfg, KernelPlan.choose("cpu", mode="reference"))
    for p in block.parameters():
        p.data.normal_(0.0, 0.3)
    x = torch.randn(9, 16)
    probs = torch.softmax(block.gate(x), dim=-1)  # [T, E]
    top, ids = probs.topk(2, dim=-1)
    if norm:
        top = top / top.sum(-1, keepdim=True)
    dense = torch.stack([e(x) for e in block.experts], dim=1)  # [T, E, hidden]
    expected = (dense.gather(1, ids[:, :, None].expand(-1, -1, 16)) * top[:, :, None]).sum(1)
    torch.testing.assert_close(block(x), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("path", ["reference", "native-per-op"])
@pytest.mark.parametrize("arch", ARCHS)
def test_greedy_matches_transformers_on_each_cpu_path(arch: str, path: str, moe_dirs, hf_models,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRGATE_KERNELS", "reference" if path == "reference" else "auto")
    runner = ModelRunner(moe_dirs[arch], num_kv_blocks=160)
    if path != "reference" and runner.kernels.choice("fused").impl != "native":
        pytest.skip("the native CPU kernels did not build here")
    assert runner.model.native_stack is None  # MoE never runs in the whole-model program
    if path != "reference":
        assert runner.kernels.choice("layer_stack").why.startswith("mixture-of-experts")
        if runner.kernels.choice("dense_linears").impl == "panel":  # experts on cpu_gemm.c
            expert = runner.model.decoder_layers()[0].mlp.experts[0]
            assert type(expert.gate_up_proj).__name__ == type(expert.down_proj).__name__ == "PanelLinear"
    prompts = _prompts(runner.config.vocab_size, 12, seed=11)
    max_new = [random.Random(i).randint(4, 16) for i in range(12)]
    expected = [_hf_greedy(hf_models[arch], p, n) for p, n in zip(prompts, max_new, strict=True)]
    assert sum(map(len, expected)) >= 60  # not a run of early EOS
    assert PagedDriver(runner, chunk=5, seed=2).generate(prompts, max_new, stagger=2) == expected


def _dequantized_hf(model_dir: Path, method: str):
    """transformers on exactly the weights the engine's codes stand for: every decoder linear and
    every expert's [gate; up] and down (per-row scales and groups: quantizing the fused [2I, H]
    slice equals quantizing gate and up apart). Routers stay float, as in the engine."""
    hf = _hf(model_dir)
    qm = QuantMethod.parse(method)
    with torch.no_grad():
        for name, module in hf.named_modules():
            if isinstance(module, torch.nn.Linear) and ".layers." in name:
                module.weight.copy_(dequantize_weight(quantize_weight(module.weight.detach().clone(), qm)))
            elif name.endswith("mlp.experts"):
                for param in (module.gate_up_proj, module.down_proj):
                    for e in range(param.shape[0]):
                        param[e].copy_(dequantize_weight(quantize_weight(param[e].detach().clone(), qm)))
    return hf


@pytest.mark.parametrize("method", ["int8", "int4-g16"])
@pytest.mark.parametrize("arch", ARCHS)
def test_a_quantized_folder_matches_transformers_on_its_dequantized_weights(
        arch: str, method: str, moe_dirs, tmp_path: Path) -> None:
    out = tmp_path / method
    quantize_folder(moe_dirs[arch], out, QuantMethod.parse(method))
    runner = ModelRunner(out, num_kv_blocks=96)
    assert runner.quantization_name == method
    experts = [m for n, m in runner.model.named_modules() if ".experts." in n and n.endswith("down_proj")]
    assert experts and all(type(m).__name__ == "QuantLinear" for m in experts)
    hf = _dequantized_hf(moe_dirs[arch], method)
    prompts = _prompts(runner.config.vocab_size, 6, seed=3)
    expected = [_hf_greedy(hf, p, 10) for p in prompts]
    assert PagedDriver(runner, chunk=7, seed=1).generate(prompts, 10) == expected


def test_int8_on_load_matches_transformers_on_its_dequantized_weights(moe_dirs) -> None:
    runner = ModelRunner(moe_dirs["qwen3_moe"], num_kv_blocks=96, quantization="int8")
    hf = _dequantized_hf(moe_dirs["qwen3_moe"], "int8")
    prompts = _prompts(runner.config.vocab_size, 6, seed=5)
    expected = [_hf_greedy(hf, p, 10) for p in prompts]
    assert PagedDriver(runner, chunk=6, seed=3).generate(prompts, 10) == expected


@pytest.mark.parametrize("arch", ARCHS)
async def test_prefix_cache_hits_give_transformers_tokens(arch: str, moe_dirs, hf_models) -> None:
    await check_prefix_cache_hits(moe_dirs[arch], lambda prompt, n: _hf_greedy_past_eos(hf_models[arch], prompt, n))


@pytest.mark.parametrize("arch", ARCHS)
def test_preemption_and_recompute_give_transformers_tokens(arch: str, moe_dirs, hf_models) -> None:
    # 24 blocks of 4 tokens cannot hold four sequences of ~60 tokens: requests get preempted
    core = engine(moe_dirs[arch], num_kv_blocks=24)
    for i, prompt in enumerate(PROMPTS):
        add(core, f"r{i}", prompt, greedy(30))
    results = drain(core)
    assert core.scheduler.num_preemptions > 0 and core.scheduler.kv.check_pool_whole()
    for i, prompt in enumerate(PROMPTS):
        assert results[f"r{i}"].token_ids == _hf_greedy_past_eos(hf_models[arch], prompt, 30)


@pytest.fixture(scope="module")
def dense_draft_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-layer random Qwen3 (dense) with the targets' tokenizer: a poor draft."""
    return make_tiny_model(tmp_path_factory.mktemp("qwen3-draft"), "qwen3", seed=7, num_hidden_layers=1)


@pytest.mark.parametrize("draft", ["self", "dense"])
@pytest.mark.parametrize("arch", ARCHS)
def test_speculative_greedy_is_identical(arch: str, draft: str, moe_dirs, dense_draft_dir: Path) -> None:
    folder = moe_dirs[arch] if draft == "self" else dense_draft_dir
    core = run_both(moe_dirs[arch], f"draft:{folder}", mixed_requests())
    s = core.stats
    assert s.spec_drafts > 0
    if draft == "self":  # the target as its own draft (through its model: MoE has no lean forward)
        assert s.spec_accepted_tokens == s.spec_draft_tokens
    else:
        assert s.spec_accepted_tokens < s.spec_draft_tokens
    assert core.speculator.proposer.kv.check_pool_whole()


def test_speculative_greedy_through_preemption_with_an_moe_draft(moe_dirs) -> None:
    folder = moe_dirs["qwen3_moe"]
    core = run_both(folder, f"draft:{folder}", mixed_requests(30), num_kv_blocks=24)
    assert core.scheduler.num_preemptions > 0 and core.stats.spec_accepted_tokens > 0


@pytest.mark.parametrize("arch", ARCHS)
def test_quantized_kv_caches_keep_greedy_tokens(arch: str, moe_dirs) -> None:
    """As test_kv_cache_quant.py for the dense families: int8 / int4 KV against a float32 one. The
    bound is lower than the dense families' 0.9: a routing decision is discontinuous, so KV
    rounding that moves a router score past another expert's changes the token outright (measured
    here: Mixtral int8 0.78, one prompt's first token flips; Qwen3-MoE int8 1.0)."""
    prompts = [[1, *range(40, 58)], [1, 7, 8], [1, *range(90, 130)], [1, 5, 9, 200, 31, 64]]
    outs = {}
    for kv in (None, "int8", "int4"):
        runner = ModelRunner(moe_dirs[arch], block_size=8, num_kv_blocks=40, kv_cache_dtype=kv)
        outs[kv] = PagedDriver(runner, chunk=7, seed=3, stop_at_eos=False).generate(prompts, 8)
    pairs = [(x, y) for p, q in zip(outs["int8"], outs[None], strict=True) for x, y in zip(p, q, strict=True)]
    agreement = sum(x == y for x, y in pairs) / len(pairs)
    print(f"{arch}: greedy token agreement of int8 KV with float32 KV: {agreement:.3f}")
    assert agreement >= 0.75
    assert all(len(o) == 8 for o in outs["int4"])  # runs; its agreement is the quality delta eval reports


def test_experts_fused_into_3d_tensors_are_refused_by_name(moe_dirs, tmp_path: Path) -> None:
    """transformers' in-memory layout (mlp.experts.gate_up_proj [E, 2I, H]) in a folder: a clear
    error naming it, not a wrong model."""
    import shutil

    from safetensors.torch import load_file, save_file

    folder = tmp_path / "fused"
    shutil.copytree(moe_dirs["qwen3_moe"], folder)
    state = load_file(str(folder / "model.safetensors"))
    experts = [state.pop(f"model.layers.0.mlp.experts.{e}.gate_proj.weight") for e in range(6)]
    state["model.layers.0.mlp.experts.gate_up_proj"] = torch.stack(experts)
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(KeyError, match="experts stored as one 3D tensor per layer are not supported"):
        ModelRunner(folder, num_kv_blocks=16)


def test_experts_on_the_fused_swiglu_panel_linears_match_transformers(tmp_path: Path) -> None:
    """Experts of 64 (a [gate; up] of 128 rows, two panels): the native panel GEMM applies the
    SwiGLU itself (what a real-sized MoE runs); the tiny models' 48 do not take that branch."""
    folder = make_tiny_model(tmp_path / "wide", "qwen3_moe", seed=5, moe_intermediate_size=64, norm_topk_prob=True)
    runner = ModelRunner(folder, num_kv_blocks=96)
    expert = runner.model.decoder_layers()[0].mlp.experts[0]
    if not getattr(expert.gate_up_proj, "fused_swiglu", False):
        pytest.skip("the native panel linears did not build here")
    hf = _hf(folder)
    prompts = _prompts(runner.config.vocab_size, 6, seed=9)
    expected = [_hf_greedy(hf, p, 12) for p in prompts]
    assert PagedDriver(runner, chunk=6, seed=2).generate(prompts, 12, stagger=2) == expected


eval_files = evaluation.eval_files  # the held-out text and golden set of test_evaluation.py (a fixture)


@pytest.mark.parametrize("arch", ARCHS)
def test_eval_runs_on_moe_and_reports_the_int8_weights_delta(arch: str, moe_dirs, eval_files,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    heldout, golden = eval_files
    code, m, table = evaluation._eval(capsys, "--model", str(moe_dirs[arch]), "--quantization", "int8",
                                      "--heldout", str(heldout), "--golden", str(golden),
                                      "--max-ppl-delta-pct", "100", "--max-pass-rate-drop", "1",
                                      "--min-greedy-agreement", "0")
    assert code == 0, table
    assert "weights int8" in table and m["perplexity"] > 1.0
    assert m["perplexity"] != m["baseline_perplexity"]  # the experts really run on int8 codes
    print(f"{arch}: int8 weights perplexity delta {m['perplexity_delta_pct']:.3f}%, greedy agreement"
          f" {m['greedy_agreement']:.3f}")
