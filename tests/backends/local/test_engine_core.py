"""EngineCore without threads: one step is schedule -> execute -> update -> outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from fairgate.backends.local.engine.config import EngineConfig
from fairgate.backends.local.engine.core import EngineCore, StepFailed
from fairgate.backends.local.engine.factory import admission_limits, build_engine_parts
from fairgate.backends.local.engine.output import OutputTracker
from fairgate.backends.local.engine.types import RunnerInput, SamplingParams
from fairgate.backends.local.model.runner import ModelRunner
from fairgate.scheduler.queue import FCFSQueue
from fairgate.scheduler.request import SchedRequest


def make_request(core: EngineCore, rid: str, ids: list[int], max_tokens: int) -> None:
    sampling = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
    tracker = OutputTracker(rid, sampling, len(ids), max_tokens, frozenset(), decoder=None)
    core.add(SchedRequest(rid, list(ids), max_tokens), tracker)


def test_a_request_runs_to_its_max_tokens_in_steps(tiny_model_dir: Path) -> None:
    parts = build_engine_parts(
        EngineConfig(str(tiny_model_dir), num_kv_blocks=16, max_num_batched_tokens=4), wait_queue=FCFSQueue()
    )
    core = EngineCore(parts)
    make_request(core, "a", [1, 2, 3, 4, 5, 6], 3)
    first = core.step()  # 4 of 6 prompt tokens: nothing sampled yet
    assert first.ran and first.outputs == [] and core.stats.tokens_computed == 4
    tokens: list[int] = []
    for _ in range(3):
        (out,) = core.step().outputs
        tokens += out.token_ids
    assert len(tokens) == 3 and out.finished and out.finish_reason == "length"
    assert out.usage.prompt_tokens == 6 and out.usage.completion_tokens == 3
    assert not core.has_unfinished and core.stats.steps == 4 and core.stats.generation_tokens == 3
    # 9 tokens never fill a 16-token block: nothing was cached, every block is free again
    assert parts.block_manager.check_pool_whole() and parts.block_manager.num_cached_blocks == 0
    assert core.step().ran is False  # nothing left to schedule


class BrokenRunner(ModelRunner):
    def execute(self, inputs: list[RunnerInput]) -> list[int | None]:
        raise RuntimeError("injected")


def test_a_failed_forward_pass_names_the_requests_to_fail(tiny_model_dir: Path) -> None:
    runner = BrokenRunner(tiny_model_dir, num_kv_blocks=8)
    core = EngineCore(build_engine_parts(EngineConfig(str(tiny_model_dir)), runner=runner))
    make_request(core, "a", [1, 2, 3], 2)
    with pytest.raises(StepFailed) as failed:
        core.step()
    assert failed.value.request_ids == ["a"] and failed.value.message == "engine error: RuntimeError"
    (out,) = core.fail(failed.value.request_ids, failed.value.message)
    assert out.finish_reason == "error" and out.error == "engine error: RuntimeError"
    assert core.stats.requests_failed == 1 and not core.has_unfinished


def test_abort_returns_the_last_delta_once(tiny_model_dir: Path) -> None:
    core = EngineCore(build_engine_parts(EngineConfig(str(tiny_model_dir), num_kv_blocks=8)))
    make_request(core, "a", [1, 2, 3], 5)
    core.step()
    out = core.abort("a")
    assert out is not None and out.finish_reason == "abort" and core.abort("a") is None
    assert core.stats.requests_aborted == 1 and core.scheduler.num_running == 0


def test_admission_limits_cap_the_context_at_the_kv_pool() -> None:
    # 4 blocks x 4 tokens hold 16 tokens: a model of 64 is capped there, and the message says so
    assert admission_limits(4, 4, 64, 100, None) == admission_limits(4, 4, 64, 100, 32)
    limits = admission_limits(4, 4, 64, 100, None)
    assert (limits.max_model_len, limits.kv_limited, limits.vocab_size) == (16, True, 100)
    limits = admission_limits(100, 4, 64, 100, None)
    assert (limits.max_model_len, limits.kv_limited) == (64, False)
    assert admission_limits(100, 4, 64, 100, 48).max_model_len == 48
