"""The native CPU decode attention (kernels/native/cpu_attention.c) against the torch reference, its
build cache, and what the kernel plan does when it cannot build."""

from __future__ import annotations

import logging
import platform

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fairgate.kernels import KernelPlan
from fairgate.kernels.native import abi, build
from fairgate.kernels.ops import cpu_attention, reference
from tests.kernels.paged_inputs import assert_close, random_paged_kv

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
CPU = torch.device("cpu")


def _case(lens, num_kv_heads, group, head_dim, block_size, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    kv = random_paged_kv(lens, num_kv_heads, head_dim, block_size, dtype, CPU, gen)
    q = torch.randn(len(lens), num_kv_heads * group, head_dim, generator=gen)
    return q, kv


def _both(q, kv, scale):
    out = cpu_attention.paged_decode_attention(q, kv.k_cache, kv.v_cache, kv.block_tables, kv.seq_lens, scale)
    expected = reference.paged_decode_attention(q, kv.k_cache, kv.v_cache, kv.block_tables, kv.seq_lens, scale)
    return out, expected


def test_the_library_builds_here():
    assert cpu_attention.library() is not None, "the C compiler that CI machines have should build cpu_attention.c"


@pytest.mark.parametrize(
    ("block_size", "head_dim", "group", "dtype"),
    [
        (16, 64, 1, torch.float32),
        (16, 128, 4, torch.float16),
        (32, 64, 8, torch.bfloat16),
        (32, 128, 1, torch.float32),
        (8, 16, 2, torch.float32),  # blocks shorter than the 16-token fold
        (16, 48, 3, torch.bfloat16),  # a head size that is neither 64 nor 128: the generic path
    ],
)
def test_decode_matches_reference(block_size, head_dim, group, dtype):
    # one token, a context ending mid-block, one ending on a block edge, one over many blocks
    lens = [1, 2 * block_size + 5, 3 * block_size, 300]
    q, kv = _case(lens, 2, group, head_dim, block_size, dtype, seed=block_size + head_dim + group)
    out, expected = _both(q, kv, head_dim**-0.5)
    assert out.dtype == torch.float32 and out.shape == q.shape
    torch.testing.assert_close(out, expected.float(), atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="the AVX2 build is an x86 one")
def test_the_avx2_build_matches_the_reference(monkeypatch):
    # Without AVX-512 a float32 cache is read in 8-float vectors (cpu_attention.c's RL), 8 tokens
    # folded at once: contexts shorter than 8, ending mid-fold, over many blocks; three head sizes.
    narrow = abi.open_library(abi.ATTENTION, ("-mno-avx512f",))
    monkeypatch.setattr(cpu_attention, "library", lambda: narrow)
    for block_size, head_dim, group in ((16, 64, 1), (8, 128, 4), (32, 16, 2)):
        q, kv = _case([1, 5, 2 * block_size + 3, 300], 2, group, head_dim, block_size, torch.float32, seed=head_dim)
        out, expected = _both(q, kv, head_dim**-0.5)
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_many_sequences_and_few_sequences_split_the_same(threads):
    """64 sequences run one per work item; 1-2 sequences are split across KV-head runs."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for lens in ([17 + 7 * i for i in range(64)], [250], [3, 90]):
            q, kv = _case(lens, 8, 2, 64, 16, torch.float32, seed=len(lens))
            out, expected = _both(q, kv, 0.125)
            torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    finally:
        torch.set_num_threads(before)


def test_output_keeps_the_query_dtype_and_extreme_scores_stay_finite():
    q, kv = _case([40, 5], 2, 2, 64, 16, torch.float32, seed=3)
    q = (q * 40).to(torch.bfloat16)  # large logits: the softmax must subtract the max
    out, expected = _both(q, kv, 1.0)
    assert out.dtype == torch.bfloat16 and torch.isfinite(out.float()).all()
    assert_close(out, expected)


@settings(max_examples=12, deadline=None)
@given(
    block_size=st.sampled_from([8, 16, 32]),
    head_dim=st.sampled_from([16, 64, 128]),
    group=st.sampled_from([1, 2, 4]),
    num_kv_heads=st.integers(1, 4),
    dtype=st.sampled_from(DTYPES),
    lens=st.lists(st.integers(1, 120), min_size=1, max_size=5),
    seed=st.integers(0, 2**16),
)
def test_decode_random_shapes(block_size, head_dim, group, num_kv_heads, dtype, lens, seed):
    q, kv = _case(lens, num_kv_heads, group, head_dim, block_size, dtype, seed)
    out, expected = _both(q, kv, head_dim**-0.5)
    torch.testing.assert_close(out, expected.float(), atol=1e-5, rtol=1e-5)


def test_head_sizes_off_the_vector_width_take_the_torch_path(monkeypatch):
    q, kv = _case([9, 20], 2, 2, 24, 16, torch.float32, seed=5)
    monkeypatch.setattr(cpu_attention, "library", lambda: pytest.fail("the library must not be called"))
    out = cpu_attention.paged_decode_attention(q, kv.k_cache, kv.v_cache, kv.block_tables, kv.seq_lens, 0.2)
    expected = reference.paged_decode_attention(q, kv.k_cache, kv.v_cache, kv.block_tables, kv.seq_lens, 0.2)
    assert torch.equal(out, expected)


def test_a_cache_that_is_not_the_pool_layout_is_refused():
    q, kv = _case([9], 2, 1, 64, 16, torch.float32, seed=6)
    with pytest.raises(ValueError, match="layout"):
        cpu_attention.paged_decode_attention(q, kv.k_cache.transpose(1, 2), kv.v_cache.transpose(1, 2),
                                             kv.block_tables, kv.seq_lens, 0.1)


def test_build_is_cached_by_source_and_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("FAIRGATE_KERNEL_CACHE", str(tmp_path))
    abi.open_library(abi.ATTENTION)
    built = sorted(p.name for p in tmp_path.iterdir())
    assert len(built) == 1 and built[0].startswith("cpu_attention-") and built[0].endswith(".so")
    stamp = (tmp_path / built[0]).stat().st_mtime_ns
    abi.open_library(abi.ATTENTION)  # a second process finds the library and builds nothing
    assert sorted(p.name for p in tmp_path.iterdir()) == built
    assert (tmp_path / built[0]).stat().st_mtime_ns == stamp


def test_without_a_compiler_auto_falls_back_and_native_fails(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("FAIRGATE_KERNEL_CACHE", str(tmp_path))  # nothing built there yet
    monkeypatch.setenv("CC", "false")  # a "compiler" that always fails
    monkeypatch.setattr(build.shutil, "which", lambda name: "/bin/false" if name == "false" else None)
    abi.forget()
    try:
        with caplog.at_level(logging.WARNING, logger="kernels"):
            assert cpu_attention.library() is None
        assert any("native CPU kernels unavailable" in r.getMessage() for r in caplog.records)
        assert list(tmp_path.iterdir()) == []  # no half-written library left behind
        auto = KernelPlan.choose("cpu", mode="auto")
        assert auto.ops is reference and auto.fused is reference
        assert auto.summary.startswith("torch reference kernels")
        assert auto.choice("layer_stack").impl == "per-op" and auto.choice("dense_linears").impl != "panel"
        with pytest.raises(RuntimeError, match="FAIRGATE_KERNELS=native"):
            KernelPlan.choose("cpu", mode="native")
    finally:
        abi.forget()


def test_auto_on_cpu_dispatches_to_the_native_kernel(monkeypatch):
    monkeypatch.delenv("FAIRGATE_KERNELS", raising=False)
    from fairgate.kernels.ops import cpu_ops

    auto = KernelPlan.choose("cpu")
    assert auto.ops is cpu_ops
    assert auto.summary == "native CPU kernels"
    q, kv = _case([30], 1, 2, 64, 16, torch.float32, seed=8)
    calls = []
    real = cpu_ops.paged_decode_attention
    monkeypatch.setattr(cpu_ops, "paged_decode_attention", lambda *a: calls.append(1) or real(*a))
    auto.paged_decode_attention(q, kv.k_cache, kv.v_cache, kv.block_tables, kv.seq_lens, 0.1)
    assert calls == [1]


def test_runner_greedy_tokens_identical_on_native_and_reference_paths(tiny_model_dir, monkeypatch):
    """The whole native CPU path (decode kernel and packed linears) against pure torch, through
    chunked prefill, mixed steps and decode-only steps."""
    from fairgate.backends.local.model.runner import ModelRunner
    from tests.backends.local.paged_driver import PagedDriver

    outputs = {}
    for mode in ("reference", "native"):
        monkeypatch.setenv("FAIRGATE_KERNELS", mode)
        runner = ModelRunner(tiny_model_dir, dtype="float32", block_size=16, num_kv_blocks=16)
        assert runner.packed_linears == (0 if mode == "reference" else 2 * 4 + 1)
        prompts = [[1, *range(40, 58)], [1, 7, 8], [1, *range(90, 130)]]
        outputs[mode] = PagedDriver(runner, chunk=6, seed=1, stop_at_eos=False).generate(prompts, [4, 6, 5])
    assert [len(o) for o in outputs["reference"]] == [4, 6, 5]
    assert outputs["native"] == outputs["reference"]
