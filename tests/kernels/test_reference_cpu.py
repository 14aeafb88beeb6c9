"""The CPU fast paths in kernels.reference against plain dense attention written out here."""

from __future__ import annotations

import random

import torch

from kernels import reference

BS, HKV, H, D = 4, 2, 6, 8  # GQA group of 3


def _paged(lens: list[int], seed: int = 0):
    """Random caches, shuffled block tables, and each sequence's contiguous K/V for checking."""
    g = torch.Generator().manual_seed(seed)
    num_blocks = sum((n + BS - 1) // BS for n in lens) + 3
    k_cache = torch.randn(num_blocks, BS, HKV, D, generator=g)
    v_cache = torch.randn(num_blocks, BS, HKV, D, generator=g)
    free = list(range(num_blocks))
    random.Random(seed).shuffle(free)
    tables, dense = [], []
    for n in lens:
        t = [free.pop() for _ in range((n + BS - 1) // BS)]
        tables.append(t)
        idx = torch.tensor(t)
        dense.append((k_cache[idx].reshape(-1, HKV, D)[:n], v_cache[idx].reshape(-1, HKV, D)[:n]))
    width = max(len(t) + 2 for t in tables)  # extra padding columns must be ignored
    bt = torch.tensor([t + [0] * (width - len(t)) for t in tables], dtype=torch.int32)
    return k_cache, v_cache, bt, dense


def _dense(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """q [q, H, D] at the last q positions of k/v [T, Hkv, D]; causal."""
    q_len, ctx = q.shape[0], k.shape[0]
    k = k.repeat_interleave(H // HKV, dim=1)  # [T, H, D]
    v = v.repeat_interleave(H // HKV, dim=1)
    scores = torch.einsum("qhd,thd->hqt", q, k) * scale
    q_pos = torch.arange(ctx - q_len, ctx)[:, None]
    scores = scores.masked_fill(torch.arange(ctx)[None, :] > q_pos, float("-inf"))
    return torch.einsum("hqt,thd->qhd", torch.softmax(scores, -1), v)


def test_decode_matches_dense_and_padded_form():
    lens = [1, 4, 5, 17, 3, 12]
    k_cache, v_cache, bt, dense = _paged(lens)
    q = torch.randn(len(lens), H, D)
    sl = torch.tensor(lens, dtype=torch.int32)
    out = reference.paged_decode_attention(q, k_cache, v_cache, bt, sl, 0.3)
    for i, (k, v) in enumerate(dense):
        torch.testing.assert_close(out[i], _dense(q[i : i + 1], k, v, 0.3)[0], atol=1e-5, rtol=1e-5)
    padded = reference._decode_padded(q, k_cache, v_cache, bt, sl, 0.3, None)
    torch.testing.assert_close(out, padded, atol=1e-5, rtol=1e-5)


def test_prefill_full_and_with_cached_prefix():
    lens = [9, 13, 1, 8]  # context lengths
    q_lens = [9, 5, 1, 1]  # whole prompt, a chunk after 8 cached, single tokens
    k_cache, v_cache, bt, dense = _paged(lens, seed=1)
    q = torch.randn(sum(q_lens), H, D)
    qsl = torch.tensor([0, 9, 14, 15, 16], dtype=torch.int32)
    out = reference.paged_prefill_attention(
        q, k_cache, v_cache, bt, qsl, torch.tensor(lens, dtype=torch.int32), 0.25
    )
    for i, (k, v) in enumerate(dense):
        qs, qe = int(qsl[i]), int(qsl[i + 1])
        torch.testing.assert_close(out[qs:qe], _dense(q[qs:qe], k, v, 0.25), atol=1e-5, rtol=1e-5)


def test_empty_decode_batch():
    k_cache, v_cache, bt, _ = _paged([3])
    out = reference.paged_decode_attention(
        torch.empty(0, H, D), k_cache, v_cache, bt[:0], torch.empty(0, dtype=torch.int32), 1.0
    )
    assert out.shape == (0, H, D)
