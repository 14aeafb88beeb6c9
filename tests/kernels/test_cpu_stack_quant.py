"""The one-call decoder stack on weight-only quantized linears (cpu_stack.c calling cpu_quant.c's
int8 / int4 kernel, then cpu_fused.c's silu_mul for the gate/up projection) gives the per-op
path's bits: the same hidden states and KV-cache writes on decode-only, prefill-only and mixed
steps, the same greedy tokens for staggered batches and behind prefix-cache hits; and the plan
names what the stack's linears run on, or why a quantized model stays per op (int8-a8)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from fairgate.backends.local.model.quantization import quantize_folder
from fairgate.backends.local.model.runner import ModelRunner
from fairgate.kernels import QuantMethod
from tests.backends.local.paged_driver import PagedDriver
from tests.helpers.hf_parity import check_prefix_cache_hits
from tests.helpers.tiny_models import make_tiny_model
from tests.kernels.test_cpu_stack import run_both, runner_for, step_inputs

METHODS = ("int8", "int4-g32")


@pytest.fixture(scope="module", params=["llama", "qwen2", "qwen3"])
def tiny_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp(f"qstack-{request.param}"), request.param, seed=3)


def quant_runner(folder: Path, method: str, **kwargs) -> ModelRunner:
    runner = runner_for(folder, quantization=method, **kwargs)
    if runner.model.native_stack is None:
        pytest.skip("the native CPU kernels did not build here")
    return runner


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("kind", ["decode", "prefill", "mixed"])
def test_the_quantized_stack_gives_the_per_op_bits(tiny_dir: Path, method: str, kind: str) -> None:
    runner = quant_runner(tiny_dir, method)
    assert runner.quantization_name == method
    h_native, h_per_op, kv_native, kv_per_op = run_both(runner, step_inputs(kind))
    assert h_native.equal(h_per_op)
    assert kv_native.equal(kv_per_op)


@pytest.mark.parametrize("method", METHODS)
def test_staggered_batches_take_the_per_op_greedy_tokens(tiny_dir: Path, method: str) -> None:
    stack = quant_runner(tiny_dir, method)
    per_op = runner_for(tiny_dir, quantization=method)
    per_op.model.native_stack = None
    calls = []
    real = stack.model.native_stack

    def spy(*args):
        calls.append(1)
        return real(*args)  # type: ignore[misc]

    stack.model.native_stack = spy  # type: ignore[assignment]
    rng = random.Random(5)
    prompts = [[rng.randrange(3, stack.config.vocab_size) for _ in range(rng.randint(3, 30))] for _ in range(6)]
    max_new = [rng.randint(4, 12) for _ in prompts]
    native = PagedDriver(stack, chunk=5, seed=2, stop_at_eos=False).generate(prompts, max_new, stagger=2)
    assert native == PagedDriver(per_op, chunk=5, seed=2, stop_at_eos=False).generate(prompts, max_new, stagger=2)
    assert [len(t) for t in native] == max_new and len(calls) > len(prompts)  # the stack ran every step


async def test_prefix_cache_hits_on_the_int8_stack_give_the_per_op_tokens(tmp_path: Path) -> None:
    folder = make_tiny_model(tmp_path / "llama", "llama", seed=3)
    quantize_folder(folder, tmp_path / "int8", QuantMethod.parse("int8"))
    assert quant_runner(tmp_path / "int8", "int8").model.native_stack is not None  # the engine's runner takes it
    per_op = ModelRunner(tmp_path / "int8", num_kv_blocks=64)
    per_op.model.native_stack = None

    def greedy(prompt: list[int], n: int) -> list[int]:
        return PagedDriver(per_op, chunk=7, seed=1, stop_at_eos=False).generate([prompt], n)[0]

    await check_prefix_cache_hits(tmp_path / "int8", greedy)


@pytest.mark.parametrize("method", METHODS)
def test_the_plan_names_what_the_stacks_linears_run_on(tiny_dir: Path, method: str) -> None:
    runner = quant_runner(tiny_dir, method)
    choice = runner.kernels.choice("layer_stack")
    assert choice.impl == "native"
    assert f"linears: {method[:4]} on cpu_quant.c" in choice.why


def test_int8_a8_stays_per_op_and_says_why(tiny_dir: Path) -> None:
    runner = runner_for(tiny_dir, quantization="int8-a8")
    layer = runner.model.layers[0].attn.qkv_proj
    if layer.cpu_kind is not None:  # no SIMD int8 x int8 path here: the weight-only kernel runs it
        assert runner.model.native_stack is not None or not layer.native
        return
    assert runner.model.native_stack is None
    choice = runner.kernels.choice("layer_stack")
    if runner.kernels.choice("fused").impl == "native":
        assert choice == type(choice)("per-op", "int8-a8 linears run per op (not on cpu_quant.c's weight-only kernel)")


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("kind", ["decode", "prefill", "mixed"])
def test_the_stack_on_float32_panels_gives_the_per_op_and_the_quantized_bits(
        tiny_dir: Path, method: str, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRGATE_QUANT_PANELS", "1")  # every step on the panels, the stack's and the per-op layers'
    monkeypatch.setenv("FAIRGATE_QUANT_TILES", "off")  # an AMX box's tile unit would take int8 instead
    runner = quant_runner(tiny_dir, method)
    assert runner.model.layers[0].attn.qkv_proj.panels_f32 is not None
    assert "from 1 rows on float32 panels" in runner.kernels.choice("layer_stack").why
    h_native, h_per_op, kv_native, kv_per_op = run_both(runner, step_inputs(kind))
    assert h_native.equal(h_per_op)
    assert kv_native.equal(kv_per_op)
    monkeypatch.setenv("FAIRGATE_QUANT_PANELS", "off")
    quantized = quant_runner(tiny_dir, method)
    assert quantized.model.layers[0].attn.qkv_proj.panels_f32 is None
    h_quantized, _, kv_quantized, _ = run_both(quantized, step_inputs(kind))
    assert h_quantized.equal(h_native)  # the panels' bits are the quantized kernel's
    assert kv_quantized.equal(kv_native)


@pytest.mark.parametrize("method", METHODS)
def test_steps_on_either_side_of_the_panel_rows_take_the_quantized_tokens(
        tiny_dir: Path, method: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRGATE_QUANT_PANELS", "6")  # prefill chunks and wide decodes on panels, the rest not
    monkeypatch.setenv("FAIRGATE_QUANT_TILES", "off")
    stack = quant_runner(tiny_dir, method)
    monkeypatch.setenv("FAIRGATE_QUANT_PANELS", "off")
    per_op = runner_for(tiny_dir, quantization=method)
    per_op.model.native_stack = None
    rng = random.Random(9)
    prompts = [[rng.randrange(3, stack.config.vocab_size) for _ in range(rng.randint(3, 30))] for _ in range(8)]
    max_new = [rng.randint(4, 12) for _ in prompts]
    native = PagedDriver(stack, chunk=5, seed=2, stop_at_eos=False).generate(prompts, max_new, stagger=2)
    assert native == PagedDriver(per_op, chunk=5, seed=2, stop_at_eos=False).generate(prompts, max_new, stagger=2)
