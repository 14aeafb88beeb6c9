"""The native CPU prefill attention (kernels/native/cpu_attention.c `paged_prefill_attention`) against
the torch reference (SDPA per sequence)."""

from __future__ import annotations

import platform

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fairgate.kernels import KernelPlan
from fairgate.kernels.native import abi
from fairgate.kernels.ops import cpu_attention, cpu_ops, reference
from tests.kernels.paged_inputs import random_paged_kv

CPU = torch.device("cpu")
pytestmark = pytest.mark.skipif(cpu_attention.library() is None, reason="no C compiler for cpu_attention.c")


def _case(chunks, num_kv_heads, group, head_dim, block_size, dtype=torch.float32, seed=0):
    """chunks: (new tokens, context length) per sequence."""
    gen = torch.Generator().manual_seed(seed)
    kv = random_paged_kv([ctx for _, ctx in chunks], num_kv_heads, head_dim, block_size, dtype, CPU, gen)
    starts = torch.tensor([0, *torch.tensor([q for q, _ in chunks]).cumsum(0).tolist()], dtype=torch.int32)
    q = torch.randn(int(starts[-1]), num_kv_heads * group, head_dim, generator=gen)
    return q, kv, starts


@pytest.fixture(params=["native", "avx2"])
def build(request, monkeypatch):
    """The library this machine builds, and (on any x86 CPU) the one a CPU without AVX-512 runs:
    there the kernel works in 8-float vectors (cpu_attention.c's RL)."""
    if request.param == "avx2":
        if platform.machine() not in ("x86_64", "AMD64"):
            pytest.skip("the AVX2 build is an x86 one")
        narrow = abi.open_library(abi.ATTENTION, ("-mno-avx512f",))
        monkeypatch.setattr(cpu_attention, "library", lambda: narrow)
    return request.param


def _run(fn, q, kv, starts, scale):
    return fn(q, kv.k_cache, kv.v_cache, kv.block_tables, starts, kv.seq_lens, scale)


@settings(max_examples=15, deadline=None)
@given(
    block_size=st.sampled_from([8, 16, 32]),
    head_dim=st.sampled_from([16, 64, 128]),
    group=st.sampled_from([1, 2, 4]),
    num_kv_heads=st.integers(1, 3),
    chunks=st.lists(st.tuples(st.integers(1, 70), st.integers(0, 90)), min_size=1, max_size=4),
    seed=st.integers(0, 2**16),
)
def test_prefill_matches_reference(block_size, head_dim, group, num_kv_heads, chunks, seed):
    # a chunk of q new tokens after a cached prefix of p: context q + p
    chunks = [(q, q + p) for q, p in chunks]
    q, kv, starts = _case(chunks, num_kv_heads, group, head_dim, block_size, seed=seed)
    out = _run(cpu_attention.paged_prefill_attention, q, kv, starts, head_dim**-0.5)
    expected = _run(reference.paged_prefill_attention, q, kv, starts, head_dim**-0.5)
    assert out.shape == q.shape and out.dtype == torch.float32
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_long_chunks_match_reference(build):
    # the bench's shapes: 12 heads of 64, whole 512-token prompts and a chunk after a long prefix
    q, kv, starts = _case([(512, 512), (200, 700), (3, 40)], 12, 1, 64, 16, seed=3)
    out = _run(cpu_attention.paged_prefill_attention, q, kv, starts, 0.125)
    torch.testing.assert_close(out, _run(reference.paged_prefill_attention, q, kv, starts, 0.125),
                               atol=1e-5, rtol=1e-5)


def test_a_rows_bits_do_not_depend_on_its_chunk(build):
    # a 100-token prompt in one chunk, or as 37 + 63 tokens: the same bits for every row
    q, kv, starts = _case([(100, 100)], 2, 2, 64, 16, seed=4)
    whole = _run(cpu_attention.paged_prefill_attention, q, kv, starts, 0.125)
    first = cpu_attention.paged_prefill_attention(q[:37], kv.k_cache, kv.v_cache, kv.block_tables,
                                               torch.tensor([0, 37], dtype=torch.int32),
                                               torch.tensor([37], dtype=torch.int32), 0.125)
    rest = cpu_attention.paged_prefill_attention(q[37:], kv.k_cache, kv.v_cache, kv.block_tables,
                                              torch.tensor([0, 63], dtype=torch.int32), kv.seq_lens, 0.125)
    assert torch.equal(torch.cat([first, rest]), whole)


def test_other_caches_take_the_reference(monkeypatch):
    q, kv, starts = _case([(9, 20)], 2, 1, 64, 16, dtype=torch.float16, seed=5)
    monkeypatch.setattr(cpu_attention, "library", lambda: pytest.fail("the library must not be called"))
    out = _run(cpu_attention.paged_prefill_attention, q, kv, starts, 0.2)
    assert torch.equal(out, _run(reference.paged_prefill_attention, q, kv, starts, 0.2))


def test_the_cpu_kernel_set_uses_it(monkeypatch):
    monkeypatch.setenv("FAIRGATE_KERNELS", "auto")
    assert cpu_ops.paged_prefill_attention is cpu_attention.paged_prefill_attention
    q, kv, starts = _case([(5, 30)], 1, 1, 64, 16, seed=6)
    out = _run(KernelPlan.choose("cpu").paged_prefill_attention, q, kv, starts, 0.125)
    assert torch.equal(out, _run(cpu_attention.paged_prefill_attention, q, kv, starts, 0.125))
