"""The KV block pool: every block's reference count, the free queue and the prefix-cache map.

Pure Python (no torch): the model runner owns the memory, this module only says which block ids
are free, shared or cached.

Free queue. One LRU-ordered queue holds every block with no references. Uncached blocks sit at
the head (they are worth nothing), cached ones are appended at the tail when released, a
request's last block first, so its prefix head outlives its tail. Allocation takes from the
head; taking a cached block evicts it (its hash is dropped). A referenced block is never in the
queue, hence never evicted.

Prefix cache. `hash -> block` for blocks full of computed KV. A hash is only an index: each
cached block keeps its token ids, its extra key and the identity (`cache_id`) of the cached
block before it, and `KVBlock.holds` compares all three, so a hash collision can never hand out
a block holding other tokens or context.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass

BlockHash = Hashable
# (parent hash or None for the first block, the block's token ids, extra key) -> hash
HashFn = Callable[[BlockHash | None, tuple[int, ...], str], BlockHash]


def sha256_block_hash(parent: BlockHash | None, token_ids: tuple[int, ...], extra: str) -> bytes:
    """Stable across processes (unlike `hash()`), so replicas can compare prefixes."""
    h = hashlib.sha256()
    h.update(parent if isinstance(parent, bytes) else b"")
    salt = extra.encode()
    h.update(len(salt).to_bytes(4, "little"))
    h.update(salt)
    h.update(array("q", token_ids).tobytes())
    return h.digest()


@dataclass(slots=True, eq=False)
class KVBlock:
    """One block of the pool. `cache_id` > 0 while it is registered in the prefix cache."""

    block_id: int
    ref_count: int = 0
    block_hash: BlockHash | None = None
    cache_id: int = 0
    parent_cache_id: int = 0  # cache_id of the block before it in its sequence (0: first block)
    token_ids: tuple[int, ...] = ()
    extra: str = ""

    def holds(self, parent_cache_id: int, token_ids: tuple[int, ...], extra: str) -> bool:
        """Whether this cached block is exactly these tokens after exactly that parent."""
        return self.parent_cache_id == parent_cache_id and self.token_ids == token_ids and self.extra == extra

    def uncache(self) -> None:
        self.block_hash, self.cache_id, self.parent_cache_id = None, 0, 0
        self.token_ids, self.extra = (), ""


class BlockPool:
    """`num_blocks` blocks: reference counts, the LRU free queue, the hash -> block map."""

    def __init__(self, num_blocks: int) -> None:
        if num_blocks < 1:
            raise ValueError("num_blocks must be positive")
        self.blocks = [KVBlock(i) for i in range(num_blocks)]
        self._free: OrderedDict[int, KVBlock] = OrderedDict((b.block_id, b) for b in self.blocks)
        self._cached: dict[BlockHash, KVBlock] = {}
        self._next_cache_id = 1
        self.num_evictions = 0  # cumulative, for metrics (and to invalidate a stale lookup)

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    @property
    def num_free_blocks(self) -> int:
        return len(self._free)

    @property
    def num_cached_blocks(self) -> int:
        return len(self._cached)

    def free_block_ids(self) -> list[int]:
        """Free queue, head (next to be allocated) first."""
        return list(self._free)

    def get_new_block(self) -> KVBlock:
        """Take the free queue's head with one reference, evicting it from the cache if cached.

        The caller checks `num_free_blocks` first; an empty queue raises KeyError."""
        _, block = self._free.popitem(last=False)
        if block.cache_id:
            if self._cached.get(block.block_hash) is block:
                del self._cached[block.block_hash]
            block.uncache()
            self.num_evictions += 1
        block.ref_count = 1
        return block

    def touch(self, block: KVBlock) -> None:
        """Add a reference (a prefix-cache hit); an idle block leaves the free queue."""
        if block.ref_count == 0:
            del self._free[block.block_id]
        block.ref_count += 1

    def free_blocks(self, block_ids: list[int]) -> None:
        """Drop one reference from each block of a table (in table order).

        Blocks left unreferenced join the free queue: cached ones at the tail, the table's
        last block first (its prefix head is evicted last); uncached ones at the head, in
        table order."""
        uncached: list[KVBlock] = []
        for block_id in reversed(block_ids):
            block = self.blocks[block_id]
            block.ref_count -= 1
            if block.ref_count == 0:
                if block.cache_id:
                    self._free[block_id] = block  # tail: most recently used
                else:
                    uncached.append(block)
        for block in uncached:  # reversed twice: the head keeps table order
            self._free[block.block_id] = block
            self._free.move_to_end(block.block_id, last=False)

    def lookup(self, block_hash: BlockHash) -> KVBlock | None:
        return self._cached.get(block_hash)

    def cache(self, block: KVBlock, block_hash: BlockHash, token_ids: tuple[int, ...], extra: str,
              parent_cache_id: int) -> None:
        """Register a block full of computed KV under `block_hash` (not yet registered)."""
        block.block_hash, block.token_ids, block.extra = block_hash, token_ids, extra
        block.parent_cache_id = parent_cache_id
        block.cache_id = self._next_cache_id
        self._next_cache_id += 1
        self._cached[block_hash] = block

    def reset_cache(self) -> None:
        """Forget every cached prefix (the blocks stay where they are in the free queue)."""
        for block in self._cached.values():
            block.uncache()
        self._cached.clear()
