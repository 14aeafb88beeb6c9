"""BlockManager: block ids, free-queue order, ref counts, prefix caching, eviction, salts."""

from __future__ import annotations

import pytest

from fairgate.backends.local.kv_cache.block_manager import BlockManager, sha256_block_hash
from fairgate.scheduler.request import SchedRequest


def req(rid: str, tokens: list[int], salt: str | None = "s", tenant: str = "t") -> SchedRequest:
    return SchedRequest(rid, list(tokens), max_tokens=8, tenant=tenant, cache_salt=salt)


def admit(bm: BlockManager, r: SchedRequest, num_new: int | None = None) -> int:
    """Admission as the planner does it: lookup, then allocate the rest (or `num_new`)."""
    r.num_computed_tokens = bm.get_computed_tokens(r)
    hit = r.num_computed_tokens
    assert bm.allocate_slots(r, r.num_tokens - hit if num_new is None else num_new)
    return hit


def compute(bm: BlockManager, r: SchedRequest, upto: int | None = None) -> None:
    """What update_from_output does once the runner computed KV up to `upto` tokens."""
    r.num_computed_tokens = r.num_tokens if upto is None else upto
    bm.cache_full_blocks(r)


def prefilled(bm: BlockManager, rid: str, tokens: list[int], **kw: str | None) -> SchedRequest:
    """A request admitted and its whole prompt computed (its full blocks cached)."""
    r = req(rid, tokens, **kw)
    admit(bm, r)
    compute(bm, r)
    return r


def test_allocate_takes_lowest_ids_and_free_returns_them_to_the_head() -> None:
    bm = BlockManager(8, block_size=4)
    a, b = req("a", range(10)), req("b", range(100, 105))
    admit(bm, a)
    admit(bm, b)
    assert bm.block_table("a") == [0, 1, 2]
    assert bm.block_table("b") == [3, 4]
    assert bm.free_block_ids() == [5, 6, 7]
    assert bm.num_free_blocks == 3 and bm.num_used_blocks == 5
    bm.free(a)  # nothing computed, so nothing cached: uncached blocks go first, in table order
    assert bm.free_block_ids() == [0, 1, 2, 5, 6, 7]
    assert bm.block_table("a") == []
    bm.free(b)
    assert bm.free_block_ids() == [3, 4, 0, 1, 2, 5, 6, 7]
    assert bm.check_pool_whole()


def test_decode_growth_takes_one_block_at_a_boundary() -> None:
    bm = BlockManager(4, block_size=4)
    a = prefilled(bm, "a", range(4))
    assert bm.block_table("a") == [0]
    a.output_token_ids.append(9)
    assert bm.allocate_slots(a, 1)  # token 5 needs a second block
    assert bm.block_table("a") == [0, 1]
    a.num_computed_tokens = 5
    a.output_token_ids.append(9)
    assert bm.allocate_slots(a, 1)
    assert bm.block_table("a") == [0, 1]


def test_cached_blocks_are_released_to_the_tail_last_block_first() -> None:
    bm = BlockManager(8, block_size=4)
    a = prefilled(bm, "a", range(10))  # 10 tokens: blocks 0 and 1 full and cached, block 2 partial
    assert bm.num_cached_blocks == 2
    assert bm.cached_tokens_of(0) == (0, 1, 2, 3) and bm.cached_tokens_of(2) is None
    bm.free(a)
    assert bm.free_block_ids() == [2, 3, 4, 5, 6, 7, 1, 0]
    assert bm.check_pool_whole() and bm.num_cached_blocks == 2


def test_prefix_hit_shares_blocks_and_counts_refs() -> None:
    bm = BlockManager(8, block_size=4)
    a = prefilled(bm, "a", range(10))
    b = req("b", [*range(8), 50, 51, 52])
    assert admit(bm, b) == 8
    assert bm.block_table("b") == [0, 1, 3]
    assert [bm.ref_count(i) for i in range(4)] == [2, 2, 1, 1]
    assert bm.prefix_cache_queries == 10 + 11 and bm.prefix_cache_hits == 8
    bm.free(a)
    assert bm.free_block_ids() == [2, 4, 5, 6, 7]  # 0 and 1 still held by b
    assert bm.ref_count(0) == 1
    bm.free(b)
    assert bm.free_block_ids() == [3, 2, 4, 5, 6, 7, 1, 0]
    assert bm.check_pool_whole()


def test_hit_on_idle_cached_blocks_takes_them_out_of_the_free_queue() -> None:
    bm = BlockManager(6, block_size=2)
    a = prefilled(bm, "a", [1, 2, 3, 4, 5])
    bm.free(a)
    assert bm.free_block_ids() == [2, 3, 4, 5, 1, 0]
    b = req("b", [1, 2, 3, 4, 9])
    assert admit(bm, b) == 4
    assert bm.block_table("b") == [0, 1, 2]
    assert bm.free_block_ids() == [3, 4, 5]
    assert bm.num_evictions == 0


def test_never_the_whole_prompt_and_only_full_blocks() -> None:
    bm = BlockManager(8, block_size=4)
    prefilled(bm, "a", range(8))
    assert bm.get_computed_tokens(req("same", range(8))) == 4  # the last token is recomputed
    assert bm.get_computed_tokens(req("longer", range(9))) == 8
    assert bm.get_computed_tokens(req("mid", [0, 1, 2, 3, 4, 5, 77, 78, 79])) == 4
    assert bm.get_computed_tokens(req("short", [0, 1, 2])) == 0


def test_salts_and_tenants_isolate_cached_prefixes() -> None:
    bm = BlockManager(16, block_size=4)
    prefilled(bm, "a", range(9), salt="acme")
    assert bm.get_computed_tokens(req("x", range(9), salt="globex")) == 0
    assert bm.get_computed_tokens(req("y", range(9), salt="acme")) == 8
    # No salt from the engine: the tenant is the salt, in its own namespace.
    prefilled(bm, "t", range(9), salt=None, tenant="acme")
    assert bm.get_computed_tokens(req("u", range(9), salt=None, tenant="globex")) == 0
    assert bm.get_computed_tokens(req("v", range(9), salt=None, tenant="acme")) == 8
    assert bm.get_computed_tokens(req("w", range(9), salt="t:acme")) == 0


def test_output_tokens_are_part_of_cached_blocks() -> None:
    bm = BlockManager(8, block_size=2)
    a = prefilled(bm, "a", [1, 2, 3])
    a.output_token_ids += [4, 5]
    assert bm.allocate_slots(a, 1)
    compute(bm, a, upto=4)  # block 1 = prompt token 3 + output token 4
    assert bm.cached_tokens_of(bm.block_table("a")[1]) == (3, 4)
    assert bm.get_computed_tokens(req("b", [1, 2, 3, 4, 6])) == 4


def test_lru_eviction_order_and_evicted_hash_is_dropped() -> None:
    bm = BlockManager(4, block_size=2)
    a = prefilled(bm, "a", [1, 2, 3, 4])
    bm.free(a)
    assert bm.free_block_ids() == [2, 3, 1, 0]  # a's 2 blocks cached, last one first
    b = req("b", [5, 6, 7, 8])
    admit(bm, b)
    assert bm.block_table("b") == [2, 3]
    compute(bm, b)
    bm.free(b)
    assert bm.free_block_ids() == [1, 0, 3, 2]
    c = req("c", [9, 9, 9])
    admit(bm, c)  # 2 blocks: evicts a's tail (1) and then a's head (0)
    assert bm.block_table("c") == [1, 0]
    assert bm.num_evictions == 2
    assert bm.get_computed_tokens(req("a2", [1, 2, 3, 4, 5])) == 0
    assert bm.get_computed_tokens(req("b2", [5, 6, 7, 8, 5])) == 4


def test_blocks_in_use_are_never_evicted_and_failure_changes_nothing() -> None:
    bm = BlockManager(3, block_size=2)
    a = prefilled(bm, "a", [1, 2, 3, 4])
    b = req("b", [7, 7, 7, 7])
    assert not bm.allocate_slots(b, 4)  # 2 blocks wanted, 1 free
    assert bm.block_table("b") == [] and bm.free_block_ids() == [2]
    assert bm.cached_tokens_of(0) == (1, 2) and bm.num_evictions == 0
    bm.free(a)
    # A hit on idle cached blocks needs them *and* the new ones from the same free queue.
    c = req("c", [1, 2, 3, 4, 5, 6, 7, 8, 9])
    c.num_computed_tokens = bm.get_computed_tokens(c)
    assert c.num_computed_tokens == 4
    before = bm.free_block_ids()
    assert not bm.allocate_slots(c, 5)  # blocks 0, 1 + 3 new > 3 in the pool
    assert bm.free_block_ids() == before and bm.ref_count(0) == 0
    assert bm.prefix_cache_queries == 4  # a failed admission is not counted


def test_concurrent_identical_blocks_are_deduplicated() -> None:
    bm = BlockManager(8, block_size=2)
    a, b = req("a", [1, 2, 3, 4, 5]), req("b", [1, 2, 3, 4, 6])
    admit(bm, a)
    admit(bm, b)  # before a computed anything: no hit, own blocks
    assert bm.block_table("a") == [0, 1, 2] and bm.block_table("b") == [3, 4, 5]
    compute(bm, a)
    compute(bm, b)
    assert bm.block_table("b") == [0, 1, 5]  # b now shares a's copies
    assert bm.ref_count(0) == 2 and bm.ref_count(3) == 0
    assert bm.free_block_ids() == [3, 4, 6, 7]  # b's duplicates went back first
    assert bm.num_cached_blocks == 2
    bm.free(a)
    bm.free(b)
    assert bm.check_pool_whole()


def test_hash_collision_never_returns_a_wrong_block() -> None:
    bm = BlockManager(16, block_size=2, hash_fn=lambda parent, tokens, extra: 0)
    prefilled(bm, "a", [1, 2, 3, 4, 5])  # block 1 collides with block 0: only block 0 gets cached
    assert bm.num_cached_blocks == 1
    assert bm.get_computed_tokens(req("b", [9, 9, 3, 4, 5])) == 0
    assert bm.get_computed_tokens(req("c", [1, 2, 3, 4, 5])) == 2
    assert bm.get_computed_tokens(req("d", [1, 2, 1, 2, 5])) == 2  # same tokens, other parent


def test_a_collision_in_the_chain_is_caught_by_the_parent_identity() -> None:
    # A hash that ignores the parent: [2, 2] after [1, 1] and after [3, 3] collide.
    bm = BlockManager(16, block_size=2, hash_fn=lambda parent, tokens, extra: (tokens, extra))
    prefilled(bm, "a", [1, 1, 2, 2, 7])
    b = req("b", [3, 3, 2, 2, 7])
    assert admit(bm, b) == 0
    compute(bm, b)  # [3, 3] is cached; its [2, 2] collides with a's and is not
    c = req("c", [3, 3, 2, 2, 9])
    assert bm.get_computed_tokens(c) == 2  # a's [2, 2] block was computed after [1, 1]


def test_reset_prefix_cache_only_when_idle() -> None:
    bm = BlockManager(8, block_size=2)
    a = prefilled(bm, "a", [1, 2, 3, 4, 5])
    assert not bm.reset_prefix_cache()
    bm.free(a)
    assert bm.reset_prefix_cache()
    assert bm.num_cached_blocks == 0 and bm.cached_tokens_of(0) is None
    assert bm.get_computed_tokens(req("b", [1, 2, 3, 4, 5])) == 0
    assert bm.check_pool_whole()


def test_prefix_caching_off() -> None:
    bm = BlockManager(8, block_size=2, enable_prefix_caching=False)
    a = prefilled(bm, "a", [1, 2, 3, 4, 5])
    assert bm.num_cached_blocks == 0
    assert bm.get_computed_tokens(req("b", [1, 2, 3, 4, 5])) == 0
    bm.free(a)
    assert bm.free_block_ids() == [0, 1, 2, 3, 4, 5, 6, 7]
    assert bm.prefix_cache_queries == 0


def test_admission_with_a_wrong_computed_count_is_a_bug() -> None:
    bm = BlockManager(8, block_size=2)
    a = req("a", [1, 2, 3, 4, 5])
    a.num_computed_tokens = 2  # nothing is cached
    with pytest.raises(RuntimeError):
        bm.allocate_slots(a, 3)


def test_lookup_state_is_released_by_free() -> None:
    bm = BlockManager(4, block_size=2)
    a = req("a", [1, 2, 3])
    bm.get_computed_tokens(a)  # keeps a's block hashes for its admission
    assert bm.num_tracked_requests == 1 and bm.check_pool_whole()
    bm.free(a)
    assert bm.num_tracked_requests == 0


def test_sha256_block_hash_chains_parent_tokens_and_extra() -> None:
    h1 = sha256_block_hash(None, (1, 2), "s:a")
    assert h1 == sha256_block_hash(None, (1, 2), "s:a")
    assert h1 != sha256_block_hash(None, (1, 2), "s:b")
    assert h1 != sha256_block_hash(None, (2, 1), "s:a")
    assert sha256_block_hash(h1, (3, 4), "s:a") != sha256_block_hash(None, (3, 4), "s:a")


def test_a_lookup_is_not_reused_after_its_blocks_were_evicted() -> None:
    bm = BlockManager(3, block_size=2)
    a = prefilled(bm, "a", [1, 2, 3, 4, 5])
    bm.free(a)
    b = req("b", [1, 2, 3, 4, 6])
    assert bm.get_computed_tokens(b) == 4
    c = req("c", [9, 9, 9, 9, 9, 9])
    admit(bm, c)  # takes all 3 blocks, evicting a's cached ones
    b.num_computed_tokens = 4
    with pytest.raises(RuntimeError):  # never the stale blocks of the earlier lookup
        bm.allocate_slots(b, 1)
    assert bm.block_table("c") == [2, 1, 0] and bm.block_table("b") == []


def test_probe_prefix_reports_cached_tokens_and_changes_nothing() -> None:
    bm = BlockManager(8, block_size=2)
    a = prefilled(bm, "a", [1, 2, 3, 4, 5], salt="acme")
    bm.free(a)
    before = bm.free_block_ids()
    assert bm.probe_prefix([1, 2, 3, 4, 9], cache_salt="acme") == 4
    assert bm.probe_prefix([1, 2, 3, 4, 9], cache_salt="globex") == 0
    assert bm.free_block_ids() == before and bm.num_tracked_requests == 0
    assert bm.prefix_cache_queries == 5  # probes are not admissions
