"""Mixture-of-experts models (Mixtral, Qwen3-MoE) on the Triton kernels: greedy tokens identical
to the reference path (the sparse MLP itself is torch on both; attention and the KV cache run on
Triton, under the interpreter on the CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.tiny_models import make_tiny_model
from tests.kernels.test_engine_kernel_paths import assert_triton_tokens_match_reference

pytest.importorskip("triton")


@pytest.mark.parametrize("arch", ["mixtral", "qwen3_moe"])
def test_moe_greedy_tokens_identical_with_triton_and_reference(arch: str, device, monkeypatch,
                                                               tmp_path: Path) -> None:
    model_dir = make_tiny_model(tmp_path / arch, arch)
    assert_triton_tokens_match_reference(model_dir, device.type, monkeypatch)
