"""The kernel plan: which implementation runs each operation, chosen once, and what happens
without triton."""

from __future__ import annotations

import inspect
import logging
import sys
from types import SimpleNamespace

import pytest
import torch

from fairgate.kernels import OPERATIONS, KernelPlan, plan
from fairgate.kernels.ops import cpu_fused, cpu_ops, reference


def test_auto_on_cpu_uses_native_kernels_without_importing_triton(monkeypatch):
    monkeypatch.delenv("FAIRGATE_KERNELS", raising=False)
    monkeypatch.setattr(plan, "_load_triton", lambda: pytest.fail("triton must not load"))
    auto = KernelPlan.choose("cpu")
    assert auto.ops is cpu_ops and auto.fused is cpu_fused
    assert auto.summary == "native CPU kernels"
    monkeypatch.setattr(plan, "_load_native", lambda: (None, "no compiler"))
    fallback = KernelPlan.choose("cpu")
    assert fallback.ops is reference and fallback.fused is reference
    assert fallback.summary == "torch reference kernels (no compiler)"


def test_the_mode_is_read_once_when_the_plan_is_chosen(monkeypatch):
    monkeypatch.setenv("FAIRGATE_KERNELS", "reference")
    chosen = KernelPlan.choose("cpu")
    monkeypatch.setenv("FAIRGATE_KERNELS", "native")  # too late for this plan
    assert chosen.mode == "reference" and chosen.ops is reference
    assert chosen.argmax(torch.tensor([[0.0, 2.0, 2.0]])).tolist() == [1]


def test_the_plan_names_every_operation_with_a_reason(monkeypatch):
    for mode in ("auto", "reference"):
        described = KernelPlan.choose("cpu", mode=mode).describe()
        assert list(described) == list(OPERATIONS)
        assert all(": " in line and line.split(": ", 1)[1] for line in described.values())
    reference_plan = KernelPlan.choose("cpu", mode="reference").describe()
    assert set(reference_plan.values()) <= {"reference: FAIRGATE_KERNELS=reference", "torch: FAIRGATE_KERNELS=reference",
                                            "per-op: FAIRGATE_KERNELS=reference"}
    lines = KernelPlan.choose("cpu", mode="reference").log_lines()
    assert lines[0].startswith("kernel plan on cpu (FAIRGATE_KERNELS=reference, gemm=auto)")
    assert len(lines) == 1 + len(OPERATIONS)


def test_a_plan_records_what_the_model_did_not_take():
    auto = KernelPlan.choose("cpu", mode="auto")
    if auto.choice("layer_stack").impl != "native":
        pytest.skip("the native CPU kernels did not build here")
    settled = auto.settled(None, None)
    assert settled.choice("layer_stack").impl == "per-op" and settled.choice("greedy_head").impl == "logits"
    assert settled.ops is auto.ops and auto.choice("layer_stack").impl == "native"  # a new plan


def test_reference_mode_packs_nothing_and_auto_packs_cpu_linears(monkeypatch):
    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    monkeypatch.setenv("FAIRGATE_KERNELS", "reference")
    assert KernelPlan.choose("cpu").pack_linears(model) == 0 and type(model[0]) is torch.nn.Linear
    monkeypatch.setenv("FAIRGATE_KERNELS", "auto")
    monkeypatch.setattr(plan, "_load_triton", lambda: (None, "no triton here"))
    assert KernelPlan.choose("cuda").pack_linears(model) == 0  # only the CPU path packs
    from fairgate.kernels.layers.panel_linear import packing_available

    assert KernelPlan.choose("cpu").pack_linears(model) == (1 if packing_available() else 0)


def test_gemm_option_keeps_f_linear_or_insists_on_onednn(monkeypatch):
    monkeypatch.setenv("FAIRGATE_KERNELS", "auto")
    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    assert KernelPlan.choose("cpu", "torch").pack_linears(model) == 0 and type(model[0]) is torch.nn.Linear
    with pytest.raises(ValueError, match="CPU only"):
        KernelPlan.choose("cuda", "onednn")
    with pytest.raises(ValueError, match="expected one of"):
        KernelPlan.choose("cpu", "mkl")
    from fairgate.kernels.layers.panel_linear import packing_available

    if packing_available():  # FAIRGATE_KERNELS=reference does not stop an explicit onednn
        monkeypatch.setenv("FAIRGATE_KERNELS", "reference")
        assert KernelPlan.choose("cpu", "onednn").pack_linears(model) == 1


def test_reference_mode_wins_even_on_cuda(monkeypatch):
    monkeypatch.setenv("FAIRGATE_KERNELS", "reference")
    monkeypatch.setattr(plan, "_load_triton", lambda: pytest.fail("triton must not load"))
    assert KernelPlan.choose("cuda").ops is reference


def test_triton_mode_and_auto_on_cuda_use_triton(monkeypatch):
    fake_ops = SimpleNamespace(name="triton ops")
    monkeypatch.setattr(plan, "_load_triton", lambda: (fake_ops, None))
    monkeypatch.setenv("FAIRGATE_KERNELS", "triton")
    assert KernelPlan.choose("cpu").ops is fake_ops
    monkeypatch.setenv("FAIRGATE_KERNELS", "auto")
    on_cuda = KernelPlan.choose("cuda")
    assert on_cuda.ops is fake_ops and on_cuda.fused is reference
    assert on_cuda.summary == "triton kernels"


def test_without_triton_auto_falls_back_and_forced_triton_fails(monkeypatch):
    monkeypatch.setattr(plan, "_load_triton", lambda: (None, "ImportError: no triton"))
    monkeypatch.setenv("FAIRGATE_KERNELS", "auto")
    on_cuda = KernelPlan.choose("cuda")
    assert on_cuda.ops is reference
    assert "triton unavailable: ImportError: no triton" in on_cuda.summary
    monkeypatch.setenv("FAIRGATE_KERNELS", "triton")
    with pytest.raises(RuntimeError, match="cannot load: ImportError: no triton"):
        KernelPlan.choose("cpu")


def test_failed_import_logs_one_clear_line(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "fairgate.kernels.triton.ops", None)  # makes the import fail
    with caplog.at_level(logging.WARNING, logger="kernels"):
        ops, why = plan._load_triton.__wrapped__()
    assert ops is None and "fairgate.kernels.triton.ops" in why
    assert [r.getMessage() for r in caplog.records] == [
        f"triton kernels unavailable ({why}); using the torch reference kernels"
    ]


def test_unknown_mode_is_rejected(monkeypatch):
    monkeypatch.setenv("FAIRGATE_KERNELS", "cuda")
    with pytest.raises(ValueError, match="FAIRGATE_KERNELS='cuda'"):
        KernelPlan.choose("cpu")


def test_forced_triton_runs_the_triton_kernel_on_cpu(monkeypatch):
    """End to end through the plan's dispatch (the interpreter on CPU, CUDA with a GPU)."""
    pytest.importorskip("triton")
    monkeypatch.setenv("FAIRGATE_KERNELS", "triton")
    from fairgate.kernels.triton import ops as triton_ops

    calls = []
    real = triton_ops.write_kv
    monkeypatch.setattr(triton_ops, "write_kv", lambda *a: calls.append(1) or real(*a))
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    k_cache = torch.zeros(2, 16, 1, 64, device=device)
    v_cache = torch.zeros_like(k_cache)
    key = torch.ones(1, 1, 64, device=device)
    KernelPlan.choose(device).write_kv(key, 2 * key, k_cache, v_cache, torch.tensor([17], device=device))
    assert calls == [1]
    assert torch.equal(k_cache[1, 1, 0], key[0, 0]) and torch.equal(v_cache[1, 1, 0], 2 * key[0, 0])
    assert int((k_cache != 0).sum()) == 64


@pytest.mark.parametrize("name", ["write_kv", "paged_decode_attention", "paged_prefill_attention"])
def test_triton_ops_have_the_reference_signatures(name):
    pytest.importorskip("triton")
    from fairgate.kernels.triton import ops as triton_ops

    def params(fn):
        return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]

    assert params(getattr(triton_ops, name)) == params(getattr(reference, name))
    plan_method = getattr(KernelPlan.choose("cpu", mode="reference"), name)  # bound: `self` is not a parameter
    assert params(plan_method) == params(getattr(reference, name))
