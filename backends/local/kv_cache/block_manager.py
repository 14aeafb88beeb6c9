"""Per-request KV-cache bookkeeping over a `BlockPool`: block tables, prefix lookup, caching.

Pure Python (no torch) so the planner's tests run in milliseconds. Implements
`scheduler.kv.KVCacheManager`; the pool (block_pool.py) owns reference counts, the free queue
and the hash map, this module owns what belongs to one request: its block table, its chained
block hashes and how many of its blocks are registered in the cache.

Prefix caching. A block that is full of computed KV gets a chained hash
`H(parent_hash, token ids, extra)`; `extra` is the request's cache salt (or, when the engine
gave none, its tenant), so one tenant never hits another's prefix.

Block layout of one request (block_size 4, 10 tokens computed, 3 more scheduled):

    table:  [ b7 ][ b2 ][ b9 ][ b4 ]
    tokens:  0..3  4..7  8..11 12..    <- blocks 0-1 full (cached once computed), 2-3 partial
"""

from __future__ import annotations

from fairgate.backends.local.kv_cache.block_pool import (
    BlockHash,
    BlockPool,
    HashFn,
    KVBlock,
    sha256_block_hash,
)
from fairgate.scheduler.request import SchedRequest

__all__ = ["BlockManager", "HashFn", "KVBlock", "sha256_block_hash"]


class BlockManager:
    """Implements `scheduler.kv.KVCacheManager` over `num_blocks` blocks of `block_size` tokens."""

    def __init__(
        self,
        num_blocks: int,
        block_size: int = 16,
        enable_prefix_caching: bool = True,
        hash_fn: HashFn = sha256_block_hash,
        long_prompt_from: int | None = None,
    ) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError("num_blocks and block_size must be positive")
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        # longrope (backends/local/model/rope.py): a prompt longer than this rotates every token
        # by the long factors, so its blocks are keyed apart from a shorter prompt's
        self.long_prompt_from = long_prompt_from
        self._hash_fn = hash_fn
        self.pool = BlockPool(num_blocks)
        self._tables: dict[str, list[int]] = {}
        self._hashes: dict[str, list[BlockHash]] = {}  # per request, full blocks, computed lazily
        self._num_registered: dict[str, int] = {}  # leading blocks of a table already in cache
        # Cumulative counters, in tokens, for the engine's metrics.
        self.prefix_cache_queries = 0
        self.prefix_cache_hits = 0
        # The last lookup, reused by the admission right after it unless a block was evicted since.
        self._last_match: tuple[str, int, list[KVBlock]] | None = None

    # ------------------------------------------------------------------ sizes and stats
    @property
    def num_blocks(self) -> int:
        return self.pool.num_blocks

    @property
    def num_free_blocks(self) -> int:
        return self.pool.num_free_blocks

    @property
    def num_used_blocks(self) -> int:
        return self.pool.num_blocks - self.pool.num_free_blocks

    @property
    def usage(self) -> float:
        """Fraction of blocks referenced by some request (the KV-usage gauge)."""
        return self.num_used_blocks / self.pool.num_blocks

    @property
    def num_cached_blocks(self) -> int:
        return self.pool.num_cached_blocks

    @property
    def num_evictions(self) -> int:
        return self.pool.num_evictions

    def free_block_ids(self) -> list[int]:
        """Free queue, head (next to be allocated) first."""
        return self.pool.free_block_ids()

    def ref_count(self, block_id: int) -> int:
        return self.pool.blocks[block_id].ref_count

    def cached_tokens_of(self, block_id: int) -> tuple[int, ...] | None:
        """Token ids a cached block holds, None when the block is not in the prefix cache."""
        block = self.pool.blocks[block_id]
        return block.token_ids if block.cache_id else None

    def check_pool_whole(self) -> bool:
        """True when no request holds a block and every block is free (leak check)."""
        pool = self.pool
        return (
            not self._tables
            and pool.num_free_blocks == pool.num_blocks
            and all(b.ref_count == 0 for b in pool.blocks)
        )

    @property
    def num_tracked_requests(self) -> int:
        """Requests with per-request state (a table or lookup hashes); `free` drops it."""
        return len(self._tables.keys() | self._hashes.keys() | self._num_registered.keys())

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
        self._last_match = (request.request_id, self.pool.num_evictions, matched)
        return len(matched) * self.block_size

    def allocate_slots(self, request: SchedRequest, num_new_tokens: int) -> bool:
        need = -(-(request.num_computed_tokens + num_new_tokens) // self.block_size)
        table = self._tables.get(request.request_id)
        if table is not None:  # the hot path: a running request, at most a block more
            missing = need - len(table)
            if missing <= 0:
                return True
            pool = self.pool
            if missing > pool.num_free_blocks:
                return False
            for _ in range(missing):
                table.append(pool.get_new_block().block_id)
            return True
        return self._admit(request, need)

    def free(self, request: SchedRequest) -> None:
        rid = request.request_id
        table = self._tables.pop(rid, None)
        self._hashes.pop(rid, None)
        self._num_registered.pop(rid, None)
        if table is not None:
            self.pool.free_blocks(table)

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
        self._num_registered[rid] = self._register(request, table, done, num_full)

    def reset_prefix_cache(self) -> bool:
        """Forget every cached prefix. Refused (False) while any request holds blocks."""
        if self._tables:
            return False
        self.pool.reset_cache()
        self._last_match = None
        return True

    # ------------------------------------------------------------------ internals
    def _register(self, request: SchedRequest, table: list[int], done: int, num_full: int) -> int:
        """Cache blocks `done .. num_full - 1` of `table`; return how many are registered now."""
        pool = self.pool
        hashes = self._block_hashes(request, num_full)
        extra = self._extra(request)
        parent_id = pool.blocks[table[done - 1]].cache_id if done else 0
        dropped: list[int] = []
        for i in range(done, num_full):
            block = pool.blocks[table[i]]
            existing = pool.lookup(hashes[i])
            if existing is block:  # a prefix-cache hit, already registered
                parent_id = block.cache_id
                continue
            tokens = self._block_tokens(request, i)
            if existing is None:
                pool.cache(block, hashes[i], tokens, extra, parent_id)
            elif existing.holds(parent_id, tokens, extra):
                # Another request computed the same block first: share its copy, drop ours
                # (uncached and ours alone: it goes back to the free queue's head).
                pool.touch(existing)
                table[i] = existing.block_id
                dropped.append(block.block_id)
                block = existing
            else:
                # A real hash collision: keep the first owner, stop caching this sequence.
                num_full = pool.num_blocks + 1
                break
            parent_id = block.cache_id
        pool.free_blocks(dropped)
        return num_full

    def _extra(self, request: SchedRequest) -> str:
        # Salt and tenant live in separate namespaces so neither can impersonate the other.
        key = "s:" + request.cache_salt if request.cache_salt is not None else "t:" + request.tenant
        if self.long_prompt_from is not None and len(request.prompt_token_ids) > self.long_prompt_from:
            key += "|long"  # longrope: the same tokens rotate otherwise after a long prompt
        return key

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

    def _match_prefix(self, request: SchedRequest, max_blocks: int) -> list[KVBlock]:
        """Cached blocks holding the request's first tokens, verified block by block."""
        if max_blocks <= 0:
            return []
        hashes = self._block_hashes(request, max_blocks)
        extra = self._extra(request)
        matched: list[KVBlock] = []
        parent_id = 0
        for i in range(max_blocks):
            block = self.pool.lookup(hashes[i])
            if block is None or not block.holds(parent_id, self._block_tokens(request, i), extra):
                break
            matched.append(block)
            parent_id = block.cache_id
        return matched

    def _admit(self, request: SchedRequest, need: int) -> bool:
        pool = self.pool
        num_hit = request.num_computed_tokens // self.block_size
        last, self._last_match = self._last_match, None
        if last is not None and last[0] == request.request_id and last[1] == pool.num_evictions:
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
        if need - len(hits) + num_idle_hits > pool.num_free_blocks:
            return False
        for block in hits:
            pool.touch(block)
        table = [b.block_id for b in hits]
        for _ in range(need - len(hits)):
            table.append(pool.get_new_block().block_id)
        self._tables[request.request_id] = table
        self._num_registered[request.request_id] = len(hits)
        if self.enable_prefix_caching:
            self.prefix_cache_queries += request.num_tokens
            self.prefix_cache_hits += request.num_computed_tokens
        return True
