"""Paged KV-cache bookkeeping: fixed-size blocks, reference counts, prefix caching.

Pure Python (no torch) so the planner's tests run in milliseconds; the model runner owns the
memory, this module only says which block ids hold which tokens.

Prefix caching. A block that is full of computed KV gets a chained hash
`H(parent_hash, token ids, extra)`; `extra` is the request's cache salt (or, when the engine
gave none, its tenant), so one tenant never hits another's prefix. `_cached` maps hash -> block.
A hash is only an index: each cached block keeps its token ids, its extra and the identity
(`cache_id`) of the cached block before it, and a lookup accepts a block only when all three
match, so a hash collision can never hand out a block holding other tokens or context.

Free queue. One LRU-ordered queue holds every block with no references. Uncached blocks sit at
the head (they are worth nothing), cached ones are appended at the tail when released, a
request's last block first, so its prefix head outlives its tail. Allocation takes from the
head; taking a cached block evicts it (its hash is dropped). A referenced block is never in the
queue, hence never evicted.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from scheduler.request import SchedRequest

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


class BlockManager:
    """Implements `scheduler.kv.KVCacheManager` over `num_blocks` blocks of `block_size` tokens."""

    def __init__(
        self,
        num_blocks: int,
        block_size: int = 16,
        enable_prefix_caching: bool = True,
        hash_fn: HashFn = sha256_block_hash,
    ) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError("num_blocks and block_size must be positive")
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self._hash_fn = hash_fn
        self._blocks = [KVBlock(i) for i in range(num_blocks)]
        self._free: OrderedDict[int, KVBlock] = OrderedDict((b.block_id, b) for b in self._blocks)
        self._cached: dict[BlockHash, KVBlock] = {}
        self._next_cache_id = 1
        self._tables: dict[str, list[int]] = {}
        self._hashes: dict[str, list[BlockHash]] = {}  # per request, full blocks, computed lazily
        self._num_registered: dict[str, int] = {}  # leading blocks of a table already in cache
        # Cumulative counters, in tokens / blocks, for the engine's metrics.
        self.prefix_cache_queries = 0
        self.prefix_cache_hits = 0
        self.num_evictions = 0
        # The last lookup, reused by the admission right after it unless a block was evicted since.
        self._last_match: tuple[str, int, list[KVBlock]] | None = None

    # ------------------------------------------------------------------ sizes and stats
    @property
    def num_blocks(self) -> int:
        return len(self._blocks)

    @property
    def num_free_blocks(self) -> int:
        return len(self._free)

    @property
    def num_used_blocks(self) -> int:
        return len(self._blocks) - len(self._free)

    @property
    def usage(self) -> float:
        """Fraction of blocks referenced by some request (the KV-usage gauge)."""
        return self.num_used_blocks / len(self._blocks)

    @property
    def num_cached_blocks(self) -> int:
        return len(self._cached)

    def free_block_ids(self) -> list[int]:
        """Free queue, head (next to be allocated) first."""
        return list(self._free)

    def ref_count(self, block_id: int) -> int:
        return self._blocks[block_id].ref_count

    def cached_tokens_of(self, block_id: int) -> tuple[int, ...] | None:
        """Token ids a cached block holds, None when the block is not in the prefix cache."""
        block = self._blocks[block_id]
        return block.token_ids if block.cache_id else None

    def check_pool_whole(self) -> bool:
        """True when no request holds a block and every block is free (leak check)."""
        return (
            not self._tables
            and len(self._free) == len(self._blocks)
            and all(b.ref_count == 0 for b in self._blocks)
        )

    @property
    def num_tracked_requests(self) -> int:
        """Requests with per-request state (a table or lookup hashes); `free` drops it."""
        return len(self._tables.keys() | self._hashes.keys() | self._num_registered.keys())

    def can_ever_fit(self, num_tokens: int) -> bool:
        return -(-num_tokens // self.block_size) <= len(self._blocks)

    def probe_prefix(self, token_ids: list[int], cache_salt: str | None = None, tenant: str = "default") -> int:
        """Tokens of `token_ids` this pool holds cached (same rules as admission), changing
        nothing: for routing a request to the replica that already has its prefix."""
        probe = SchedRequest("\x00probe", list(token_ids), 1, tenant=tenant, cache_salt=cache_salt)
        try:
            return self.get_computed_tokens(probe)
        finally:
            self._hashes.pop(probe.request_id, None)
            self._last_match = None

    # ------------------------------------------------------------------ KVCacheManager
    def block_table(self, request_id: str) -> list[int]:
        return self._tables.get(request_id, [])

    def get_computed_tokens(self, request: SchedRequest) -> int:
        if not self.enable_prefix_caching:
            return 0
        # Never the whole sequence: its last token must be computed to get logits.
        matched = self._match_prefix(request, (request.num_tokens - 1) // self.block_size)
        self._last_match = (request.request_id, self.num_evictions, matched)
        return len(matched) * self.block_size

    def allocate_slots(self, request: SchedRequest, num_new_tokens: int) -> bool:
        need = -(-(request.num_computed_tokens + num_new_tokens) // self.block_size)
        table = self._tables.get(request.request_id)
        if table is not None:  # the hot path: a running request, at most a block more
            missing = need - len(table)
            if missing <= 0:
                return True
            if missing > len(self._free):
                return False
            for _ in range(missing):
                table.append(self._take_free().block_id)
            return True
        return self._admit(request, need)

    def free(self, request: SchedRequest) -> None:
        rid = request.request_id
        table = self._tables.pop(rid, None)
        self._hashes.pop(rid, None)
        self._num_registered.pop(rid, None)
        if table is None:
            return
        uncached: list[KVBlock] = []
        for block_id in reversed(table):
            block = self._blocks[block_id]
            block.ref_count -= 1
            if block.ref_count == 0:
                if block.cache_id:
                    self._free[block_id] = block  # tail: most recently used
                else:
                    uncached.append(block)
        for block in uncached:  # reversed twice: the head keeps table order
            self._free[block.block_id] = block
            self._free.move_to_end(block.block_id, last=False)

    def cache_full_blocks(self, request: SchedRequest) -> None:
        if not self.enable_prefix_caching:
            return
        rid = request.request_id
        num_full = request.num_computed_tokens // self.block_size
        done = self._num_registered.get(rid, 0)
        if num_full <= done:  # the common decode step: no block became full
            return
        table = self._tables.get(rid)
        if table is None:
            return
        hashes = self._block_hashes(request, num_full)
        extra = self._extra(request)
        parent_id = self._blocks[table[done - 1]].cache_id if done else 0
        dropped: list[KVBlock] = []
        for i in range(done, num_full):
            block = self._blocks[table[i]]
            existing = self._cached.get(hashes[i])
            if existing is block:  # a prefix-cache hit, already registered
                parent_id = block.cache_id
                continue
            tokens = self._block_tokens(request, i)
            if existing is None:
                block.block_hash, block.token_ids, block.extra = hashes[i], tokens, extra
                block.parent_cache_id = parent_id
                block.cache_id = self._next_cache_id
                self._next_cache_id += 1
                self._cached[hashes[i]] = block
            elif self._same_content(existing, parent_id, tokens, extra):
                # Another request computed the same block first: share its copy, drop ours.
                self._touch(existing)
                table[i] = existing.block_id
                block.ref_count -= 1  # uncached and ours alone: it drops to 0
                dropped.append(block)
                block = existing
            else:
                # A real hash collision: keep the first owner, stop caching this sequence.
                num_full = len(self._blocks) + 1
                break
            parent_id = block.cache_id
        self._num_registered[rid] = num_full
        for block in reversed(dropped):  # to the head, in table order, like `free`
            self._free[block.block_id] = block
            self._free.move_to_end(block.block_id, last=False)

    def reset_prefix_cache(self) -> bool:
        """Forget every cached prefix. Refused (False) while any request holds blocks."""
        if self._tables:
            return False
        for block in self._cached.values():
            self._uncache(block)
        self._cached.clear()
        self._last_match = None
        return True

    # ------------------------------------------------------------------ internals
    def _extra(self, request: SchedRequest) -> str:
        # Salt and tenant live in separate namespaces so neither can impersonate the other.
        if request.cache_salt is not None:
            return "s:" + request.cache_salt
        return "t:" + request.tenant

    def _block_tokens(self, request: SchedRequest, index: int) -> tuple[int, ...]:
        start = index * self.block_size
        end = start + self.block_size
        prompt = request.prompt_token_ids
        n = len(prompt)
        if end <= n:
            return tuple(prompt[start:end])
        out = request.output_token_ids
        if start >= n:
            return tuple(out[start - n : end - n])
        return tuple(prompt[start:]) + tuple(out[: end - n])

    def _block_hashes(self, request: SchedRequest, num_blocks: int) -> list[BlockHash]:
        hashes = self._hashes.setdefault(request.request_id, [])
        if len(hashes) < num_blocks:
            extra = self._extra(request)
            parent = hashes[-1] if hashes else None
            for i in range(len(hashes), num_blocks):
                parent = self._hash_fn(parent, self._block_tokens(request, i), extra)
                hashes.append(parent)
        return hashes

    @staticmethod
    def _same_content(block: KVBlock, parent_id: int, tokens: tuple[int, ...], extra: str) -> bool:
        return block.parent_cache_id == parent_id and block.token_ids == tokens and block.extra == extra

    def _match_prefix(self, request: SchedRequest, max_blocks: int) -> list[KVBlock]:
        """Cached blocks holding the request's first tokens, verified block by block."""
        if max_blocks <= 0:
            return []
        hashes = self._block_hashes(request, max_blocks)
        extra = self._extra(request)
        matched: list[KVBlock] = []
        parent_id = 0
        for i in range(max_blocks):
            block = self._cached.get(hashes[i])
            if block is None or not self._same_content(
                block, parent_id, self._block_tokens(request, i), extra
            ):
                break
            matched.append(block)
            parent_id = block.cache_id
        return matched

    def _admit(self, request: SchedRequest, need: int) -> bool:
        num_hit = request.num_computed_tokens // self.block_size
        last, self._last_match = self._last_match, None
        if last is not None and last[0] == request.request_id and last[1] == self.num_evictions:
            hits = last[2][:num_hit]
        else:
            hits = self._match_prefix(request, num_hit) if self.enable_prefix_caching else []
        if len(hits) != num_hit or request.num_computed_tokens % self.block_size:
            raise RuntimeError(
                f"{request.request_id}: num_computed_tokens={request.num_computed_tokens} "
                "at admission is not the cached prefix from get_computed_tokens"
            )
        # Hit blocks nobody references sit in the free queue: touching them uses it up too.
        num_idle_hits = sum(1 for b in hits if b.ref_count == 0)
        if need - len(hits) + num_idle_hits > len(self._free):
            return False
        for block in hits:
            self._touch(block)
        table = [b.block_id for b in hits]
        for _ in range(need - len(hits)):
            table.append(self._take_free().block_id)
        self._tables[request.request_id] = table
        self._num_registered[request.request_id] = len(hits)
        if self.enable_prefix_caching:
            self.prefix_cache_queries += request.num_tokens
            self.prefix_cache_hits += request.num_computed_tokens
        return True

    def _touch(self, block: KVBlock) -> None:
        if block.ref_count == 0:
            del self._free[block.block_id]
        block.ref_count += 1

    def _take_free(self) -> KVBlock:
        _, block = self._free.popitem(last=False)
        if block.cache_id:
            if self._cached.get(block.block_hash) is block:
                del self._cached[block.block_hash]
            self._uncache(block)
            self.num_evictions += 1
        block.ref_count = 1
        return block

    @staticmethod
    def _uncache(block: KVBlock) -> None:
        block.block_hash, block.cache_id, block.parent_cache_id = None, 0, 0
        block.token_ids, block.extra = (), ""
