"""The fused elementwise CPU kernels (kernels/native/cpu_fused.c) against the torch reference."""

from __future__ import annotations

import pytest
import torch

from fairgate.kernels import KernelPlan
from fairgate.kernels.ops import cpu_fused, reference


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_the_library_builds_here():
    assert cpu_fused.library() is not None, "the C compiler that CI machines have should build cpu_fused.c"


@pytest.mark.parametrize(("rows", "n"), [(1, 16), (3, 200), (64, 768), (513, 768)])
def test_rms_norm_matches_the_reference(rows, n):
    gen = _gen(rows)
    x, w = torch.randn(rows, n, generator=gen) * 3, torch.randn(n, generator=gen)
    torch.testing.assert_close(cpu_fused.rms_norm(x, w, 1e-6), reference.rms_norm(x, w, 1e-6), rtol=1e-5, atol=1e-5)


def test_rms_norm_with_residual_adds_in_place_and_normalises_the_sum():
    gen = _gen(7)
    x, h, w = torch.randn(40, 200, generator=gen), torch.randn(40, 200, generator=gen), torch.randn(200, generator=gen)
    h_ref = h.clone()
    expected = reference.rms_norm(x, w, 1e-5, h_ref)
    out = cpu_fused.rms_norm(x, w, 1e-5, h)
    torch.testing.assert_close(h, h_ref, rtol=0, atol=0)  # the residual stream: the exact sum
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("rows", "inter"), [(1, 16), (5, 100), (64, 3072)])
def test_silu_mul_matches_the_reference(rows, inter):
    gate_up = torch.randn(rows, 2 * inter, generator=_gen(inter)) * 8  # exp far from 0 both ways
    gate_up[0, 0], gate_up[0, 1] = 100.0, -100.0
    torch.testing.assert_close(cpu_fused.silu_mul(gate_up), reference.silu_mul(gate_up), rtol=2e-6, atol=1e-6)


def test_argmax_takes_the_first_maximum_and_nan_as_largest():
    logits = torch.randn(6, 1003, generator=_gen(3))
    logits[1, 17] = logits[1, 900] = 50.0  # a tie: the first wins
    logits[2] = float("-inf")  # nothing allowed: index 0, as torch
    logits[3, 500] = float("nan")
    logits[4, 1002] = 99.0  # in the scalar tail
    assert cpu_fused.argmax(logits).tolist() == reference.argmax(logits).tolist()
    assert cpu_fused.argmax(logits)[1].item() == 17


def test_non_float32_or_strided_inputs_take_the_reference_path():
    x = torch.randn(4, 32, dtype=torch.bfloat16)
    w = torch.ones(32, dtype=torch.bfloat16)
    torch.testing.assert_close(cpu_fused.rms_norm(x, w, 1e-6), reference.rms_norm(x, w, 1e-6))
    strided = torch.randn(8, 64).t()
    assert cpu_fused.argmax(strided).tolist() == reference.argmax(strided).tolist()


def test_dispatch_uses_the_reference_when_asked(monkeypatch):
    monkeypatch.setenv("FAIRGATE_KERNELS", "reference")
    assert KernelPlan.choose("cpu").fused is reference
    monkeypatch.setenv("FAIRGATE_KERNELS", "native")
    assert KernelPlan.choose("cpu").fused is cpu_fused


@pytest.mark.parametrize(("heads", "kv_heads", "head_dim", "tokens"), [(12, 12, 64, 70), (4, 2, 24, 5), (2, 1, 128, 2)])
def test_rope_write_kv_gives_the_reference_bits(heads, kv_heads, head_dim, tokens):
    # Same bits, not just close: the parity tests' greedy tokens must not move when this runs.
    gen = _gen(heads * head_dim + tokens)
    qkv = torch.randn(tokens, (heads + 2 * kv_heads) * head_dim, generator=gen)
    angles = torch.rand(tokens, head_dim // 2, generator=gen) * 50
    cos, sin = angles.cos(), angles.sin()
    cos_sin = torch.stack([torch.cat([cos, cos], -1), torch.cat([-sin, sin], -1)], dim=1)  # [T, 2, D]
    caches = [torch.zeros(6, 16, kv_heads, head_dim) for _ in range(4)]  # k, v native; k, v reference
    slots = torch.randperm(96, generator=gen)[:tokens]
    slots[0] = -1  # a slot the runner does not store (its row stays zero)
    q = cpu_fused.rope_write_kv(qkv, cos_sin, caches[0], caches[1], slots, heads)
    kept = slots >= 0
    q_ref = reference.rope_write_kv(qkv[kept], cos_sin[kept], caches[2], caches[3], slots[kept], heads)
    assert q is not None and q.shape == (tokens, heads, head_dim)
    assert torch.equal(q[kept], q_ref)
    assert torch.equal(q[0], reference.apply_rope(qkv[:1, : heads * head_dim].view(1, heads, head_dim), cos_sin[:1])[0])
    assert torch.equal(caches[0], caches[2]) and torch.equal(caches[1], caches[3])
    assert int(caches[0].count_nonzero()) == int(kept.sum()) * kv_heads * head_dim


def test_rope_write_kv_dispatch_falls_back_for_a_quantized_or_strided_cache():
    gen = _gen(3)
    qkv = torch.randn(4, 4 * 16, generator=gen)  # 2 heads, 1 kv head, head_dim 16
    cos_sin = torch.randn(4, 2, 16, generator=gen)
    k, v = torch.zeros(2, 4, 1, 16).transpose(0, 1), torch.zeros(2, 4, 1, 16).transpose(0, 1)  # not contiguous
    assert cpu_fused.rope_write_kv(qkv, cos_sin, k, v, torch.arange(4), 2) is None
    k2, v2 = torch.zeros(2, 4, 1, 16), torch.zeros(2, 4, 1, 16)
    q = KernelPlan.choose("cpu").rope_write_kv(qkv, cos_sin, k2, v2, torch.arange(4), 2)
    q_ref, k_ref, v_ref = reference.rotate_qkv(qkv, cos_sin, 2, 1)
    assert torch.equal(q, q_ref) and torch.equal(k2.view(-1, 1, 16)[:4], k_ref) and torch.equal(v2.view(-1, 1, 16)[:4], v_ref)


@pytest.mark.parametrize(("heads", "kv_heads", "head_dim", "tokens"), [(4, 2, 32, 9), (16, 8, 128, 3), (2, 1, 24, 1)])
def test_qk_norm_normalises_q_and_k_heads_in_place_and_leaves_v(heads, kv_heads, head_dim, tokens):
    gen = _gen(heads + head_dim + tokens)
    qkv = torch.randn(tokens, (heads + 2 * kv_heads) * head_dim, generator=gen) * 3
    qw, kw = torch.randn(head_dim, generator=gen), torch.randn(head_dim, generator=gen)
    expected = reference.qk_norm(qkv.clone(), qw, kw, 1e-6, heads, kv_heads)
    q_end, k_end = heads * head_dim, (heads + kv_heads) * head_dim
    q_heads = qkv[:, :q_end].reshape(-1, head_dim).clone()  # per head, as Qwen3's q_norm sees them
    torch.testing.assert_close(expected[:, :q_end].reshape(-1, head_dim), reference.rms_norm(q_heads, qw, 1e-6))
    torch.testing.assert_close(expected[:, q_end:k_end].reshape(-1, head_dim),
                               reference.rms_norm(qkv[:, q_end:k_end].reshape(-1, head_dim), kw, 1e-6))
    v = qkv[:, k_end:].clone()
    out = cpu_fused.qk_norm(qkv, qw, kw, 1e-6, heads, kv_heads)
    assert out.data_ptr() == qkv.data_ptr()  # in place
    assert torch.equal(out[:, k_end:], v)
    # each head row is the native rms_norm's, bit for bit (the stack and the per-op path agree)
    native_rows = cpu_fused.rms_norm(q_heads, qw, 1e-6)
    assert torch.equal(out[:, :q_end].reshape(-1, head_dim), native_rows)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
