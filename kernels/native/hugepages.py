"""CPU tensors on transparent huge pages, for memory the engine streams through every step.

A decode step reads the whole KV context of every running sequence and every weight once. The
KV pool's blocks lie anywhere in it, so each 4 KiB page of a block costs a TLB miss, which in a
virtual machine is a two-level page walk; on 2 MiB pages the same reads need 512 times fewer.
Linux backs an anonymous mapping with huge pages where `madvise(MADV_HUGEPAGE)` asks for them
(transparent huge pages in "madvise" or "always" mode). `zeros` maps such memory (the stdlib's
`mmap`, aligned to 2 MiB), asks for huge pages, touches it once so the pages are there before
the first step, and hands it to torch without a copy. Where the kernel gives no huge pages the
same memory simply stays on 4 KiB pages.

Measured on a 2-core Sapphire Rapids VM (docs/engine-performance.md): 12 layers of decode
attention for 64 sequences 75-78 -> 70 ms; the 110m benchmark pass in-process 258.5 -> 269.5 and
262.0 -> 274.5 tok/s (alternating pairs).
"""

from __future__ import annotations

import mmap

import torch

HUGE_PAGE = 2 << 20


def zeros(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A zero-filled CPU tensor whose memory asks for huge pages; below one huge page, or where
    `madvise` is not offered, a plain `torch.zeros`."""
    numel = 1
    for dim in shape:
        numel *= dim
    nbytes = numel * torch.empty(0, dtype=dtype).element_size()
    if nbytes < HUGE_PAGE or not hasattr(mmap, "MADV_HUGEPAGE"):
        return torch.zeros(shape, dtype=dtype)
    # private and anonymous (a shared mapping would be shmem, which has its own huge-page switch),
    # zero-filled, with room to align inside it
    area = mmap.mmap(-1, nbytes + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    view = memoryview(area)
    start = -_address(view) % HUGE_PAGE
    try:
        area.madvise(mmap.MADV_HUGEPAGE, start, nbytes)  # start: a multiple of the page size
    except OSError:  # transparent huge pages compiled out: 4 KiB pages, same memory
        pass
    tensor = torch.frombuffer(view, dtype=torch.uint8, count=nbytes, offset=start).view(dtype).view(shape)
    tensor.zero_()  # fault every page in now (as huge pages where granted), not during a step
    return tensor


def _address(view: memoryview) -> int:
    return torch.frombuffer(view, dtype=torch.uint8, count=1).data_ptr()


def on_huge_pages(tensor: torch.Tensor) -> float:
    """The share of `tensor`'s memory that sits on huge pages now (from /proc/self/smaps), for
    tests and diagnostics; 0.0 where that cannot be read."""
    start, end = tensor.data_ptr(), tensor.data_ptr() + tensor.numel() * tensor.element_size()
    huge = 0
    try:
        with open("/proc/self/smaps") as f:
            lo = hi = 0
            for line in f:
                head = line.split(None, 1)[0]
                if "-" in head and not head.endswith(":"):
                    lo, hi = (int(part, 16) for part in head.split("-"))
                elif head == "AnonHugePages:" and lo < end and hi > start:
                    kib = int(line.split()[1])
                    huge += min(kib * 1024, min(hi, end) - max(lo, start))
    except OSError:
        return 0.0
    return huge / max(1, end - start)
