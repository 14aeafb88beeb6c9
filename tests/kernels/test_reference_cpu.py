"""The CPU fast paths in kernels.ops.reference against plain dense attention written out here."""

from __future__ import annotations

import random

import torch

from fairgate.kernels.ops import reference

BS, HKV, H, D = 4, 2, 6, 8  # GQA group of 3


def _paged(lens: list[int], seed: int = 0, runs: list[int] | None = None):
    """Random caches, block tables, and each sequence's contiguous K/V for checking.

    Sequence i's table starts with `runs[i]` consecutive block ids (0 = all shuffled).
    """
    g = torch.Generator().manual_seed(seed)
    runs = runs or [0] * len(lens)
    num_blocks = sum((n + BS - 1) // BS for n in lens) + 3
    k_cache = torch.randn(num_blocks, BS, HKV, D, generator=g)
    v_cache = torch.randn(num_blocks, BS, HKV, D, generator=g)
    contiguous = list(range(sum(runs)))
    free = list(range(sum(runs), num_blocks))
    random.Random(seed).shuffle(free)
    tables, dense = [], []
    for n, run in zip(lens, runs, strict=True):
        nb = (n + BS - 1) // BS
        t = [contiguous.pop(0) for _ in range(run)] + [free.pop() for _ in range(nb - run)]
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


def test_decode_reads_leading_runs_in_place():
    """Tables that start with consecutive ids take the view + gathered-tail path (merged by
    log-sum-exp); a fully consecutive table is read as one view."""
    lens = [40, 33, 29, 64, 17, 21]
    runs = [10, 5, 4, 16, 3, 0]  # full run, run + tail, exact threshold, full, short, none
    k_cache, v_cache, bt, dense = _paged(lens, seed=3, runs=runs)
    assert bt[0, :10].tolist() == list(range(10))
    q = torch.randn(len(lens), H, D)
    sl = torch.tensor(lens, dtype=torch.int32)
    out = reference.paged_decode_attention(q, k_cache, v_cache, bt, sl, 0.2)
    for i, (k, v) in enumerate(dense):
        torch.testing.assert_close(out[i], _dense(q[i : i + 1], k, v, 0.2)[0], atol=1e-5, rtol=1e-5)


def test_prefill_full_and_with_cached_prefix():
    lens = [9, 13, 1, 8]  # context lengths
    q_lens = [9, 5, 1, 1]  # whole prompt, a chunk after 8 cached, single tokens
    k_cache, v_cache, bt, dense = _paged(lens, seed=1, runs=[3, 0, 0, 2])  # 1st and 4th in place
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
