"""The kernel dispatch: which implementation runs, and what happens without triton."""

from __future__ import annotations

import inspect
import logging
import sys
from types import SimpleNamespace

import pytest
import torch

from fairgate import kernels
from fairgate.kernels import reference

CPU = SimpleNamespace(is_cuda=False)
CUDA = SimpleNamespace(is_cuda=True)  # _impl only asks the tensor where it lives


def test_auto_on_cpu_uses_native_kernels_without_importing_triton(monkeypatch):
    monkeypatch.delenv("FAIRGATE_KERNELS", raising=False)
    monkeypatch.setattr(kernels, "_load_triton", lambda: pytest.fail("triton must not load"))
    from fairgate.kernels import cpu_ops

    assert kernels._impl(CPU) is cpu_ops
    assert kernels.describe_backend("cpu") == "native CPU kernels"
    monkeypatch.setattr(kernels, "_load_native", lambda: (None, "no compiler"))
    assert kernels._impl(CPU) is reference
    assert kernels.describe_backend("cpu") == "torch reference kernels (no compiler)"


def test_reference_mode_packs_nothing_and_auto_packs_cpu_linears(monkeypatch):
    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    monkeypatch.setenv("FAIRGATE_KERNELS", "reference")
    assert kernels.pack_linears(model, "cpu") == 0 and type(model[0]) is torch.nn.Linear
    monkeypatch.setenv("FAIRGATE_KERNELS", "auto")
    assert kernels.pack_linears(model, "cuda") == 0  # only the CPU path packs
    from fairgate.kernels.cpu_linear import packing_available

    assert kernels.pack_linears(model, "cpu") == (1 if packing_available() else 0)


def test_gemm_option_keeps_f_linear_or_insists_on_onednn(monkeypatch):
    monkeypatch.setenv("FAIRGATE_KERNELS", "auto")
    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    assert kernels.pack_linears(model, "cpu", "torch") == 0 and type(model[0]) is torch.nn.Linear
    with pytest.raises(ValueError, match="CPU only"):
        kernels.pack_linears(model, "cuda", "onednn")
    with pytest.raises(ValueError, match="expected one of"):
        kernels.pack_linears(model, "cpu", "mkl")
    from fairgate.kernels.cpu_linear import packing_available

    if packing_available():  # FAIRGATE_KERNELS=reference does not stop an explicit onednn
        monkeypatch.setenv("FAIRGATE_KERNELS", "reference")
        assert kernels.pack_linears(model, "cpu", "onednn") == 1


def test_reference_mode_wins_even_on_cuda(monkeypatch):
    monkeypatch.setenv("FAIRGATE_KERNELS", "reference")
    monkeypatch.setattr(kernels, "_load_triton", lambda: pytest.fail("triton must not load"))
    assert kernels._impl(CUDA) is reference


def test_triton_mode_and_auto_on_cuda_use_triton(monkeypatch):
    fake_ops = SimpleNamespace(name="triton ops")
    monkeypatch.setattr(kernels, "_load_triton", lambda: (fake_ops, None))
    monkeypatch.setenv("FAIRGATE_KERNELS", "triton")
    assert kernels._impl(CPU) is fake_ops
    monkeypatch.setenv("FAIRGATE_KERNELS", "auto")
    assert kernels._impl(CUDA) is fake_ops
    assert kernels.describe_backend("cuda") == "triton kernels"


def test_without_triton_auto_falls_back_and_forced_triton_fails(monkeypatch):
    monkeypatch.setattr(kernels, "_load_triton", lambda: (None, "ImportError: no triton"))
    monkeypatch.setenv("FAIRGATE_KERNELS", "auto")
    assert kernels._impl(CUDA) is reference
    assert "triton unavailable: ImportError: no triton" in kernels.describe_backend("cuda")
    monkeypatch.setenv("FAIRGATE_KERNELS", "triton")
    with pytest.raises(RuntimeError, match="cannot load: ImportError: no triton"):
        kernels._impl(CPU)


def test_failed_import_logs_one_clear_line(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "fairgate.kernels.triton_ops", None)  # makes the import fail
    with caplog.at_level(logging.WARNING, logger="kernels"):
        ops, why = kernels._load_triton.__wrapped__()
    assert ops is None and "fairgate.kernels.triton_ops" in why
    assert [r.getMessage() for r in caplog.records] == [
        f"triton kernels unavailable ({why}); using the torch reference kernels"
    ]


def test_unknown_mode_is_rejected(monkeypatch):
    monkeypatch.setenv("FAIRGATE_KERNELS", "cuda")
    with pytest.raises(ValueError, match="FAIRGATE_KERNELS='cuda'"):
        kernels._impl(CPU)


def test_forced_triton_runs_the_triton_kernel_on_cpu(monkeypatch):
    """End to end through the public dispatch (the interpreter on CPU, CUDA with a GPU)."""
    pytest.importorskip("triton")
    monkeypatch.setenv("FAIRGATE_KERNELS", "triton")
    from fairgate.kernels import triton_ops

    calls = []
    real = triton_ops.write_kv
    monkeypatch.setattr(triton_ops, "write_kv", lambda *a: calls.append(1) or real(*a))
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    k_cache = torch.zeros(2, 16, 1, 64, device=device)
    v_cache = torch.zeros_like(k_cache)
    key = torch.ones(1, 1, 64, device=device)
    kernels.write_kv(key, 2 * key, k_cache, v_cache, torch.tensor([17], device=device))
    assert calls == [1]
    assert torch.equal(k_cache[1, 1, 0], key[0, 0]) and torch.equal(v_cache[1, 1, 0], 2 * key[0, 0])
    assert int((k_cache != 0).sum()) == 64


@pytest.mark.parametrize("name", ["write_kv", "paged_decode_attention", "paged_prefill_attention"])
def test_triton_ops_have_the_reference_signatures(name):
    pytest.importorskip("triton")
    from fairgate.kernels import triton_ops

    def params(fn):
        return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]

    assert params(getattr(triton_ops, name)) == params(getattr(reference, name))
    assert params(getattr(kernels, name)) == params(getattr(reference, name))
