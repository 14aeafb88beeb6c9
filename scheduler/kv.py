"""The planner's view of the KV cache: a protocol, implemented by the local engine's block manager.

The planner never sees blocks' memory, only whether a request's tokens fit. Plain Python.
"""

from __future__ import annotations

from typing import Protocol

from fairgate.scheduler.request import SchedRequest


class KVCacheManager(Protocol):
    """Paged KV-cache bookkeeping (`backends.local.kv_cache.block_manager.BlockManager` over a `BlockPool`).

    Call order for one request: `get_computed_tokens` (prefix-cache lookup, admission only),
    `allocate_slots` every step it is scheduled, `cache_full_blocks` after its KV was computed,
    `free` when it finishes, is aborted or is preempted.
    """

    block_size: int

    @property
    def num_free_blocks(self) -> int: ...

    @property
    def num_blocks(self) -> int: ...

    def get_computed_tokens(self, request: SchedRequest) -> int:
        """Tokens of the longest cached prefix (a multiple of `block_size`, always fewer than
        `request.num_tokens` so the last token is computed and yields logits). Takes no refs:
        call `allocate_slots` right after, with `request.num_computed_tokens` set to it."""
        ...

    def allocate_slots(self, request: SchedRequest, num_new_tokens: int) -> bool:
        """Make the request's blocks cover `num_computed_tokens + num_new_tokens` tokens.

        On a request's first call, its first `num_computed_tokens // block_size` blocks are the
        cached prefix found by `get_computed_tokens`. Returns False, changing nothing, when not
        enough blocks are free."""
        ...

    def block_table(self, request_id: str) -> list[int]:
        """The request's block ids in order (the live list: copy it before keeping it)."""
        ...

    def free(self, request: SchedRequest) -> None:
        """Return all the request's blocks; cached ones stay reusable until evicted."""
        ...

    def cache_full_blocks(self, request: SchedRequest) -> None:
        """Register blocks that became full of computed KV so later requests can hit them."""
        ...
