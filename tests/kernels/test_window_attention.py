"""Sliding-window attention (Gemma 3's local layers) in the torch reference and the native CPU
kernels (cpu_attention.c's *_windowed entries), against a plain softmax over each query's window:
a query at position p sees keys p - window < j <= p."""

from __future__ import annotations

import platform

import pytest
import torch

from fairgate.kernels import KernelPlan
from fairgate.kernels.native import abi
from fairgate.kernels.ops import cpu_attention, cpu_ops, reference

BLOCK, HEADS, KV_HEADS, DIM = 4, 4, 2, 32  # DIM a multiple of 16: the native kernels take it


def _cache(ctx: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A shuffled-block cache holding one sequence's ctx keys and values; returns (k_cache,
    v_cache, table, keys [ctx, Hkv, D], values)."""
    gen = torch.Generator().manual_seed(seed)
    n = (ctx + BLOCK - 1) // BLOCK
    table = torch.randperm(n + 3, generator=gen)[:n].to(torch.int32)
    k_cache, v_cache = torch.zeros(n + 3, BLOCK, KV_HEADS, DIM), torch.zeros(n + 3, BLOCK, KV_HEADS, DIM)
    keys, values = torch.randn(ctx, KV_HEADS, DIM, generator=gen), torch.randn(ctx, KV_HEADS, DIM, generator=gen)
    slots = torch.tensor([int(table[p // BLOCK]) * BLOCK + p % BLOCK for p in range(ctx)])
    reference.write_kv(keys, values, k_cache, v_cache, slots)
    return k_cache, v_cache, table, keys, values  # type: ignore[return-value]


def _expected(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, positions: list[int], window: int,
              scale: float) -> torch.Tensor:
    group = HEADS // KV_HEADS
    k, v = keys.repeat_interleave(group, 1), values.repeat_interleave(group, 1)  # [ctx, H, D]
    out = []
    for row, p in enumerate(positions):
        lo = max(0, p - window + 1)
        scores = torch.einsum("hd,thd->ht", q[row], k[lo : p + 1]) * scale  # [H, window]
        out.append(torch.einsum("ht,thd->hd", scores.softmax(-1), v[lo : p + 1]))
    return torch.stack(out)


@pytest.mark.parametrize("mode", ["reference", "native", "native-avx2"])
# windows shorter than the context (reading only its last blocks), as long, longer; whole prompts and chunks
@pytest.mark.parametrize(("ctx", "q_len", "window"), [(23, 23, 5), (23, 9, 5), (30, 6, 16), (7, 7, 9), (41, 3, 6),
                                                      (41, 17, 4), (16, 16, 16), (12, 4, 12)])
def test_windowed_prefill_and_decode_match_a_plain_softmax(mode: str, ctx: int, q_len: int, window: int,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    if mode != "reference" and cpu_attention.library() is None:
        pytest.skip("the native CPU kernels did not build here")
    if mode == "native-avx2":  # float32 rows in 8-float vectors (cpu_attention.c's RL, attend_item_f32)
        if platform.machine() not in ("x86_64", "AMD64"):
            pytest.skip("the AVX2 build is an x86 one")
        narrow = abi.open_library(abi.ATTENTION, ("-mno-avx512f",))
        monkeypatch.setattr(cpu_attention, "library", lambda: narrow)
    plan = KernelPlan.choose("cpu", mode="reference" if mode == "reference" else "native")
    assert plan.ops is (reference if mode == "reference" else cpu_ops)
    k_cache, v_cache, table, keys, values = _cache(ctx, ctx + q_len)
    q = torch.randn(q_len, HEADS, DIM, generator=torch.Generator().manual_seed(window))
    positions = list(range(ctx - q_len, ctx))
    expected = _expected(q, keys, values, positions, window, 0.3)
    out = plan.paged_prefill_attention(q, k_cache, v_cache, table[None], torch.tensor([0, q_len], dtype=torch.int32),
                                       torch.tensor([ctx], dtype=torch.int32), 0.3, window=window)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    # the same queries as decode rows, each with its own context length
    dec = plan.paged_decode_attention(q, k_cache, v_cache, table[None].expand(q_len, -1).contiguous(),
                                      torch.tensor([p + 1 for p in positions], dtype=torch.int32), 0.3, ctx,
                                      window=window)
    torch.testing.assert_close(dec, expected, atol=1e-5, rtol=1e-5)
