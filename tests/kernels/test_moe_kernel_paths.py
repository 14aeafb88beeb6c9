"""Mixture-of-experts models (Mixtral, Qwen3-MoE) on the Triton kernels: greedy tokens identical
to the reference path (the sparse MLP itself is torch on both; attention and the KV cache run on
Triton, under the interpreter on the CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.tiny_models import make_tiny_model
from tests.kernels.test_engine_kernel_paths import _count_triton_calls, _generate

pytest.importorskip("triton")


@pytest.mark.parametrize("arch", ["mixtral", "qwen3_moe"])
def test_moe_greedy_tokens_identical_with_triton_and_reference(arch: str, device, monkeypatch,
                                                               tmp_path: Path) -> None:
    model_dir = make_tiny_model(tmp_path / arch, arch)
    reference_out = _generate(model_dir, device.type, monkeypatch, "reference")
    calls = _count_triton_calls(monkeypatch)
    triton_out = _generate(model_dir, device.type, monkeypatch, "triton")
    assert [len(o) for o in reference_out] == [3, 5]
    assert triton_out == reference_out
    assert set(calls) == {"write_kv", "paged_decode_attention", "paged_prefill_attention"}
