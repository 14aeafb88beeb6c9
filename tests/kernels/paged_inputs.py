"""Random paged-KV inputs shared by the kernel tests."""

from __future__ import annotations

from dataclasses import dataclass

import torch

# (atol, rtol) per dtype. fp32 runs exact ("ieee") dots on both sides, so only summation order
# differs. fp16/bf16 round the output (and, on a GPU, the softmax weights before P @ V): about
# one half-ulp at magnitudes up to ~2-4.
TOLERANCE = {
    torch.float32: (1e-4, 1e-4),
    torch.float16: (3e-3, 3e-3),
    torch.bfloat16: (2e-2, 2e-2),
}


@dataclass(slots=True)
class PagedKV:
    k_cache: torch.Tensor  # [num_blocks, block_size, num_kv_heads, head_dim]
    v_cache: torch.Tensor
    block_tables: torch.Tensor  # [num_seqs, max_blocks] int32, padded with block 0
    seq_lens: torch.Tensor  # [num_seqs] int32


def random_paged_kv(
    seq_lens: list[int],
    num_kv_heads: int,
    head_dim: int,
    block_size: int,
    dtype: torch.dtype,
    device: torch.device,
    gen: torch.Generator,
    spare_blocks: int = 2,
) -> PagedKV:
    """A cache whose blocks are shuffled across sequences, with spare blocks holding junk."""
    per_seq = [-(-n // block_size) for n in seq_lens]
    num_blocks = sum(per_seq) + spare_blocks
    order = torch.randperm(num_blocks, generator=gen).tolist()
    width = max(per_seq, default=0) + 1  # one extra padding column, as engines over-allocate
    tables = torch.zeros(len(seq_lens), width, dtype=torch.int32)
    used = 0
    for i, n in enumerate(per_seq):
        tables[i, :n] = torch.tensor(order[used : used + n], dtype=torch.int32)
        used += n
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    k = torch.randn(shape, generator=gen).to(dtype)
    v = torch.randn(shape, generator=gen).to(dtype)
    return PagedKV(
        k.to(device), v.to(device), tables.to(device),
        torch.tensor(seq_lens, dtype=torch.int32, device=device),
    )


def assert_close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    atol, rtol = TOLERANCE[expected.dtype]
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual.float().cpu(), expected.float().cpu(), atol=atol, rtol=rtol)
