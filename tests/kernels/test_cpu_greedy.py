"""The greedy LM head (kernels/native/cpu_greedy.c) returns exactly the argmax of the float32 panel
head's logits, first index on ties: random heads and rows, near-ties that bfloat16 cannot tell
apart, exact ties, part-width last panels, several summation blocks, row counts that are not a
tile's; on the AMX screen, the AVX512-BF16 one, the portable one and AVX2's. Where it does not
apply it is not built, or it hands the row back."""

from __future__ import annotations

import ctypes
import platform
import sys

import pytest
import torch
from torch import nn

from fairgate.kernels import KernelPlan
from fairgate.kernels.layers.greedy_head import GreedyHead
from fairgate.kernels.layers.panel_linear import PanelLinear, load_gemm

# native: the AMX screen where the CPU has AMX-BF16 (K a multiple of 32), else AVX512-BF16's;
# vector: AVX512-BF16's dot products where the CPU has them; portable: float32 FMAs; avx2: float32
# FMAs in 8-float vectors on pre-widened inputs (a CPU without AVX-512)
NO_AMX = ("-mno-amx-tile", "-mno-amx-bf16", "-mno-amx-int8")
PLAN = KernelPlan.choose("cpu", mode="auto")
BUILDS = {"native": (), "vector": NO_AMX, "portable": ("-mno-avx512bf16", *NO_AMX), "avx2": ("-mno-avx512f", *NO_AMX)}


def head_of(weight: torch.Tensor, bias: bool = False) -> PanelLinear:
    lin = nn.Linear(weight.shape[1], weight.shape[0], bias=bias)
    lin.weight.data.copy_(weight)
    return PanelLinear(lin)


def greedy_for(head: PanelLinear, build: str) -> GreedyHead:
    if load_gemm() is None:
        pytest.skip("the native CPU kernels did not build here")
    greedy = GreedyHead.build(head, BUILDS[build])
    assert greedy is not None
    return greedy


def full_argmax(head: PanelLinear, x: torch.Tensor) -> list[int]:
    return PLAN.argmax(head(x)).tolist()


@pytest.mark.parametrize("build", sorted(BUILDS))
@pytest.mark.parametrize(("k", "n", "std"), [(768, 4096, 0.02), (64, 1040, 0.15), (2050, 528, 0.05)])
def test_random_rows_get_the_full_argmax(build: str, k: int, n: int, std: float) -> None:
    gen = torch.Generator().manual_seed(k + n)
    head = head_of(torch.randn(n, k, generator=gen) * std)
    greedy = greedy_for(head, build)
    for rows in (1, 5, 6, 7, 13, 16, 17, 37, 64):
        for scale in (1.0, 30.0):
            x = torch.randn(rows, k, generator=gen) * scale
            assert greedy(x) == full_argmax(head, x)


@pytest.mark.parametrize("build", sorted(BUILDS))
def test_near_ties_below_bfloat16_resolution_are_decided_in_float32(build: str) -> None:
    # rows 3, 500 and 777 differ in one input by 1-2 parts in 10^4 (bfloat16 resolves 4 in 10^3):
    # their bfloat16 copies and screened scores are equal, only the float32 logits tell them apart
    gen = torch.Generator().manual_seed(1)
    weight = torch.randn(1024, 64, generator=gen) * 0.1
    base = weight[3].clone()
    for row, rel in ((500, 2e-4), (777, -1e-4)):
        weight[row] = base
        weight[row, 0] = base[0] * (1 + rel)
    assert torch.equal(weight[[3, 500, 777]].bfloat16()[:, 0], weight[[3, 3, 3]].bfloat16()[:, 0])
    head = head_of(weight)
    greedy = greedy_for(head, build)
    x = base.repeat(8, 1) * 5.0  # aligned with the tied rows: they are the top
    x[4:, 0] *= -1.0  # the sign of the one differing input flips which row wins
    expected = full_argmax(head, x)
    assert set(expected) <= {3, 500, 777} and len(set(expected)) == 2
    assert greedy(x) == expected


@pytest.mark.parametrize("build", sorted(BUILDS))
def test_exact_ties_take_the_first_index(build: str) -> None:
    gen = torch.Generator().manual_seed(2)
    weight = torch.randn(704, 32, generator=gen)
    weight[650] = weight[40]
    weight[41] = weight[40]
    head = head_of(weight)
    x = weight[40:41].clone() * 3.0
    assert full_argmax(head, x) == [40]
    assert greedy_for(head, build)(x) == [40]


def test_a_row_that_is_not_finite_is_handed_back() -> None:
    head = head_of(torch.randn(256, 32))
    greedy = greedy_for(head, "native")
    x = torch.randn(3, 32)
    x[1, 5] = float("nan")
    assert greedy(x) is None
    x[1, 5] = float("inf")
    assert greedy(x) is None


def test_steps_above_the_screens_rows_take_the_float32_heads_argmax() -> None:
    gen = torch.Generator().manual_seed(5)
    weight = torch.randn(1040, 64, generator=gen) * 0.15
    weight[900] = weight[17]  # an exact tie: the first index
    head = head_of(weight)
    greedy = greedy_for(head, "native")
    greedy.screen_rows_max = 3
    x = torch.randn(9, 64, generator=gen)
    x[2] = weight[17] * 4.0
    expected = full_argmax(head, x)
    assert expected[2] == 17
    assert greedy(x) == expected  # 9 rows: the float32 head
    assert greedy(x[:3]) == expected[:3]  # 3 rows: the screen
    x[6, 1] = float("nan")
    assert greedy(x) is None
    x[6, 1] = float("inf")
    assert greedy(x) is None


def test_calibration_keeps_the_screen_up_to_a_measured_row_count() -> None:
    greedy = greedy_for(head_of(torch.randn(4096, 256) * 0.05), "native")
    kept = greedy.calibrate(rows=(2, 8), reps=1)
    assert kept in (0, 2, sys.maxsize) and greedy.screen_rows_max == kept
    x = torch.randn(12, 256)
    assert greedy(x) == full_argmax(greedy._head, x)


def test_heads_it_does_not_take_build_nothing() -> None:
    if load_gemm() is None:
        pytest.skip("the native CPU kernels did not build here")
    assert GreedyHead.build(head_of(torch.randn(64, 32), bias=True)) is None
    assert GreedyHead.build(head_of(torch.randn(64, 33))) is None  # an odd input width
    weight = torch.randn(64, 32)
    weight[7, 3] = float("inf")
    assert GreedyHead.build(head_of(weight)) is None
    assert PLAN.greedy_head(nn.Linear(32, 64)) is None  # not a panel linear


def test_wrong_input_is_refused() -> None:
    greedy = greedy_for(head_of(torch.randn(64, 32)), "native")
    with pytest.raises(ValueError, match="float32"):
        greedy(torch.randn(2, 31))
    with pytest.raises(ValueError, match="float32"):
        greedy(torch.randn(2, 32, dtype=torch.float64))


def cpu_flags() -> set[str]:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def amx_granted() -> bool:
    """Whether Linux lets this process use the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM)."""
    if platform.machine() != "x86_64":
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(158, 0x1023, 18) == 0  # SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XTILEDATA


def test_each_build_screens_on_the_unit_it_was_built_for() -> None:
    flags = cpu_flags()
    head = head_of(torch.randn(256, 768) * 0.02)
    odd = head_of(torch.randn(256, 2050) * 0.02)  # 1025 input pairs: not whole AMX tiles
    vector = "avx512_bf16" if "avx512_bf16" in flags else "fma"
    assert greedy_for(head, "native").screen == ("amx" if {"amx_tile", "amx_bf16"} <= flags and amx_granted() else vector)
    assert greedy_for(odd, "native").screen == vector
    assert greedy_for(head, "vector").screen == vector
    assert greedy_for(head, "portable").screen == "fma"
    assert greedy_for(head, "avx2").screen == "fma"
