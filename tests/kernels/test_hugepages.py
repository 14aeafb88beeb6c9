"""kernels/native/hugepages.py: zero-filled CPU tensors whose memory sits on transparent huge pages
where the kernel grants them, and the engine's KV pool and packed weights allocated that way."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from fairgate.backends.local.model.runner import ModelRunner
from fairgate.kernels.layers.panel_linear import PanelLinear, load_gemm
from fairgate.kernels.native import hugepages
from tests.helpers.tiny_models import make_tiny_model

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def huge_pages_granted() -> bool:
    """Whether this kernel gives huge pages to memory that asks (mode "madvise" or "always")."""
    try:
        mode = THP.read_text()
    except OSError:
        return False
    return "[never]" not in mode


def asks_for_huge_pages(tensor: torch.Tensor) -> bool:
    """Whether the mapping holding `tensor` was madvised for huge pages (smaps VmFlags `hg`): what
    the allocator controls, whatever the kernel can grant at this moment."""
    start = tensor.data_ptr()
    with open("/proc/self/smaps") as f:
        inside = False
        for line in f:
            head = line.split(None, 1)[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(part, 16) for part in head.split("-"))
                inside = lo <= start < hi
            elif inside and head == "VmFlags:":
                return "hg" in line.split()[1:]
    return False


def granted_share(tensor: torch.Tensor) -> float:
    """The share on huge pages, or skip when the kernel grants none right now: a machine whose
    memory is fragmented or pressed falls back to small pages, which is the kernel's choice."""
    share = hugepages.on_huge_pages(tensor)
    if share == 0.0:
        pytest.skip("the kernel granted no huge page to a madvised mapping just now (fragmented or pressed memory)")
    return share


def test_zeros_is_a_zero_filled_writable_tensor_of_the_shape_and_dtype() -> None:
    t = hugepages.zeros((3, 1024, 1024), torch.float32)
    assert t.shape == (3, 1024, 1024) and t.dtype == torch.float32 and t.is_contiguous()
    assert int(torch.count_nonzero(t)) == 0
    t[2, 1023, 1023] = 5.0
    t[0, 0, 0] = -1.0
    assert float(t.sum()) == 4.0
    half = hugepages.zeros((2 << 20,), torch.bfloat16)
    assert half.dtype == torch.bfloat16 and half.numel() == 2 << 20 and int(torch.count_nonzero(half)) == 0


def test_zeros_sits_on_huge_pages_where_the_kernel_grants_them() -> None:
    if not huge_pages_granted():
        pytest.skip(f"transparent huge pages are off here ({THP})")
    big = hugepages.zeros((16, 1 << 20), torch.float32)  # 64 MiB
    plain = torch.zeros(16, 1 << 20)  # torch's own allocation does not ask for them
    assert asks_for_huge_pages(big) and not asks_for_huge_pages(plain)
    assert hugepages.on_huge_pages(plain) < 0.1
    assert granted_share(big) > 0.0  # what the kernel grants under load varies; none at all is a skip


def test_small_tensors_are_plain_ones() -> None:
    small = hugepages.zeros((100, 100), torch.float32)
    assert small.shape == (100, 100) and int(torch.count_nonzero(small)) == 0
    assert hugepages.on_huge_pages(small) == 0.0


def test_the_kv_pool_and_packed_weights_sit_on_huge_pages(tmp_path: Path) -> None:
    if not huge_pages_granted():
        pytest.skip(f"transparent huge pages are off here ({THP})")
    runner = ModelRunner(make_tiny_model(tmp_path / "m", "llama"), block_size=16, num_kv_blocks=4096)
    assert runner.kv_cache.numel() * runner.kv_cache.element_size() >= 8 << 20
    assert asks_for_huge_pages(runner.kv_cache)
    if load_gemm() is None:
        return
    lin = nn.Linear(1024, 2048, bias=False)
    packed = PanelLinear(lin)
    assert asks_for_huge_pages(packed.packed)
    x = torch.randn(5, 1024)
    with torch.no_grad():  # the packing into that memory is whole (the bits are test_cpu_linear.py's)
        assert torch.allclose(packed(x), torch.nn.functional.linear(x, lin.weight), atol=1e-5)
