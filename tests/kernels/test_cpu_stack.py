"""The one-call decoder stack (kernels/native/cpu_stack.c) gives the per-op path's bits: the same hidden
states and the same KV-cache writes on decode-only, prefill-only and mixed steps (GQA, qkv
biases, chunks that continue a prompt, short chunks run as decode rows), and it steps aside
(None, or never built) wherever a part does not fit its kernels."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fairgate.backends.local.engine.types import (
    RunnerInput,
    SamplingParams,
)
from fairgate.backends.local.model.runner import ModelRunner
from fairgate.kernels.programs.layer_stack import StepRows
from tests.helpers.tiny_models import make_tiny_model

BLOCK = 16
GREEDY = SamplingParams(temperature=0.0)


@pytest.fixture(scope="module", params=["llama", "qwen2", "qwen3"])
def tiny_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp(f"stack-{request.param}"), request.param, seed=3)


def runner_for(folder: Path, **kwargs) -> ModelRunner:
    runner = ModelRunner(folder, block_size=BLOCK, num_kv_blocks=48, **kwargs)
    return runner


def native_runner(folder: Path) -> ModelRunner:
    runner = runner_for(folder)
    if runner.model.native_stack is None:
        pytest.skip("the native CPU kernels did not build here")
    return runner


def step_inputs(kind: str) -> list[RunnerInput]:
    """Sequences over shuffled, distinct blocks: decode rows at various positions, a first prompt
    chunk, a chunk continuing a prompt, and a short chunk (run as decode rows, batch.py)."""
    order = torch.randperm(48, generator=torch.Generator().manual_seed(1)).tolist()
    tables = [order[i * 6:(i + 1) * 6] for i in range(8)]

    def inp(seq: int, tokens: list[int], start: int) -> RunnerInput:
        return RunnerInput(f"r{seq}", tokens, start, tables[seq], True, GREEDY)

    decodes = [inp(0, [5], 40), inp(1, [9], 0), inp(2, [17], 77), inp(3, [3], 15)]
    prefills = [inp(4, list(range(10, 47)), 0), inp(5, list(range(60, 81)), 33), inp(6, [7, 8, 9, 10, 11], 2)]
    return {"decode": decodes, "prefill": prefills, "mixed": decodes[:2] + prefills + decodes[2:]}[kind]


def run_both(runner: ModelRunner, inputs: list[RunnerInput]) -> tuple[torch.Tensor, torch.Tensor, list, list]:
    """Hidden states and caches after the step, from the stack and from the per-op layers, both
    starting from the same random cache contents."""
    gen = torch.Generator().manual_seed(7)
    start = torch.randn(runner.kv_cache.shape, generator=gen)
    step = runner._build(inputs)
    stack = runner.model.native_stack
    assert stack is not None
    with torch.inference_mode():
        runner.kv_cache.copy_(start)
        h_native = stack(runner.model.embed_tokens(step.input_ids), runner.kv_caches, rows_of(step.meta))
        assert h_native is not None  # the stack itself ran, not the per-op fallback
        kv_native = runner.kv_cache.clone()
        runner.kv_cache.copy_(start)
        runner.model.native_stack = None
        try:
            h_per_op = runner.model(step.input_ids, runner.kv_caches, step.meta)
        finally:
            runner.model.native_stack = stack
    return h_native, h_per_op, kv_native, runner.kv_cache.clone()


@pytest.mark.parametrize("kind", ["decode", "prefill", "mixed"])
def test_the_stack_gives_the_per_op_bits(tiny_dir: Path, kind: str) -> None:
    runner = native_runner(tiny_dir)
    h_native, h_per_op, kv_native, kv_per_op = run_both(runner, step_inputs(kind))
    assert h_native.shape == (sum(len(i.token_ids) for i in step_inputs(kind)), runner.config.hidden_size)
    assert torch.equal(h_native, h_per_op)
    assert torch.equal(kv_native, kv_per_op)  # the same K/V rows written at the same slots


def test_the_runner_takes_the_stack_and_samples_the_per_op_tokens(tiny_dir: Path) -> None:
    runner = native_runner(tiny_dir)
    calls = []
    stack = runner.model.native_stack

    def spy(*args):
        calls.append(1)
        return stack(*args)

    inputs = step_inputs("mixed")
    runner.model.native_stack = spy  # type: ignore[assignment]
    native = runner.execute(inputs)
    runner.model.native_stack = None
    per_op = runner.execute(inputs)
    assert calls == [1]
    assert native == per_op and all(isinstance(t, int) for t in native)


# (quantized linears: tests/kernels/test_cpu_stack_quant.py; int8 and int4 now run in the stack)
@pytest.mark.parametrize("options", [dict(gemm="onednn"), dict(gemm="torch")])
def test_no_stack_without_float32_panel_linears(tiny_dir: Path, options: dict) -> None:
    assert runner_for(tiny_dir, **options).model.native_stack is None


def test_no_stack_on_the_reference_kernels(tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRGATE_KERNELS", "reference")
    assert runner_for(tiny_dir).model.native_stack is None


def test_no_stack_when_the_gate_up_projection_keeps_its_own_swiglu(tmp_path: Path) -> None:
    # an intermediate size of 80: the [gate; up] panels cannot pair (cpu_linear.py needs 128s)
    folder = make_tiny_model(tmp_path / "narrow", "llama", seed=3, intermediate_size=80)
    runner = runner_for(folder)
    assert not runner.model.layers[0].mlp.gate_up_proj.fused_swiglu
    assert runner.model.native_stack is None


@pytest.mark.parametrize("kv_cache_dtype", ["float16", "int8"])
def test_caches_it_does_not_take_step_aside(tiny_dir: Path, kv_cache_dtype: str) -> None:
    runner = runner_for(tiny_dir, kv_cache_dtype=kv_cache_dtype)
    if runner.model.native_stack is None:
        pytest.skip("the native CPU kernels did not build here")
    step = runner._build(step_inputs("mixed"))
    rows = rows_of(step.meta)
    h = runner.model.embed_tokens(step.input_ids)
    assert runner.model.native_stack(h, runner.kv_caches, rows) is None
    hidden = runner.model(step.input_ids, runner.kv_caches, step.meta)  # the per-op path serves it
    assert torch.isfinite(hidden).all()


def test_metadata_of_another_dtype_steps_aside(tiny_dir: Path) -> None:
    runner = native_runner(tiny_dir)
    step = runner._build(step_inputs("mixed"))
    rows = rows_of(step.meta)
    h = runner.model.embed_tokens(step.input_ids)
    stack = runner.model.native_stack
    assert stack is not None
    rows.slots = rows.slots.to(torch.int32)
    assert stack(h, runner.kv_caches, rows) is None
    rows = rows_of(step.meta)
    rows.prefill_starts = None
    assert stack(h, runner.kv_caches, rows) is None
    assert stack(h.double(), runner.kv_caches, rows_of(step.meta)) is None
    assert stack(h, runner.kv_caches, rows_of(step.meta)) is not None


def rows_of(meta) -> StepRows:
    return StepRows(meta.cos_sin, meta.slot_mapping, meta.num_decodes, meta.decode_block_tables,
                    meta.decode_seq_lens, meta.prefill_block_tables, meta.prefill_query_start_loc,
                    meta.prefill_seq_lens)
