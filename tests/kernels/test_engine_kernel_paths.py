"""Greedy generation through the model runner is identical on the Triton and reference paths.

Tiny model, CPU: the Triton kernels run under the interpreter (see conftest). The driver
chunks prefill and mixes decodes with prefill chunks, so every kernel and both attention
branches of the model (decode-only steps and mixed steps) are exercised.
"""

from __future__ import annotations

from collections import Counter

import pytest

from fairgate.backends.local.model.runner import ModelRunner
from tests.backends.local.paged_driver import PagedDriver

pytest.importorskip("triton")


def _generate(model_dir, device: str, monkeypatch, mode: str) -> list[list[int]]:
    monkeypatch.setenv("FAIRGATE_KERNELS", mode)
    runner = ModelRunner(model_dir, device=device, dtype="float32", block_size=16, num_kv_blocks=16)
    # Chunks of 18 run on the prefill kernel; the short last chunk (5) and [1, 7, 8] run as
    # decode rows (batch.DECODE_ROWS_MAX), next to the first prompt's long chunks.
    prompts = [[1, *range(40, 80)], [1, 7, 8]]
    # stop_at_eos=False: both runs always take the same number of steps to compare.
    return PagedDriver(runner, chunk=18, seed=1, stop_at_eos=False).generate(prompts, [3, 5])


def _count_triton_calls(monkeypatch) -> Counter[str]:
    from fairgate.kernels.triton import ops as triton_ops

    calls: Counter[str] = Counter()
    for name in ("write_kv", "paged_decode_attention", "paged_prefill_attention"):
        real = getattr(triton_ops, name)

        def spy(*args, _real=real, _name=name):
            calls[_name] += 1
            return _real(*args)

        monkeypatch.setattr(triton_ops, name, spy)
    return calls


def assert_triton_tokens_match_reference(model_dir, device: str, monkeypatch) -> None:
    """Greedy tokens on the Triton path are the reference path's, and every Triton kernel ran."""
    reference_out = _generate(model_dir, device, monkeypatch, "reference")
    calls = _count_triton_calls(monkeypatch)
    triton_out = _generate(model_dir, device, monkeypatch, "triton")
    assert [len(o) for o in reference_out] == [3, 5]
    assert triton_out == reference_out
    assert set(calls) == {"write_kv", "paged_decode_attention", "paged_prefill_attention"}


# Qwen3: its q/k norm on the plan's torch ops; Phi-3: Llama's layer from fused checkpoint tensors (and
# partial rotary, through the reordered heads and the table);
# Gemma 3: the full layer on Triton, the windowed ones on the reference
@pytest.mark.parametrize("model", ["tiny_model_dir", "tiny_qwen3_dir", "tiny_phi3_dir", "tiny_phi3_partial_dir",
                                   "tiny_gemma3_dir"])
def test_greedy_tokens_identical_with_triton_and_reference(model, device, monkeypatch, request):
    assert_triton_tokens_match_reference(request.getfixturevalue(model), device.type, monkeypatch)
