"""BlockPool: free-queue order, reference counts, caching and eviction, without a request."""

from __future__ import annotations

import pytest

from fairgate.backends.local.kv_cache.block_pool import BlockPool


def test_new_blocks_come_from_the_head_with_one_reference() -> None:
    pool = BlockPool(4)
    a, b = pool.get_new_block(), pool.get_new_block()
    assert (a.block_id, b.block_id, a.ref_count) == (0, 1, 1)
    assert pool.free_block_ids() == [2, 3] and pool.num_free_blocks == 2


def test_freed_uncached_blocks_go_to_the_head_in_table_order_cached_ones_to_the_tail() -> None:
    pool = BlockPool(5)
    blocks = [pool.get_new_block() for _ in range(4)]  # 0 1 2 3; 4 stays free
    pool.cache(blocks[0], "h0", (1, 2), "t:a", 0)
    pool.cache(blocks[1], "h1", (3, 4), "t:a", blocks[0].cache_id)
    pool.free_blocks([0, 1, 2, 3])
    # uncached 2, 3 at the head in table order; cached ones at the tail, last block first
    assert pool.free_block_ids() == [2, 3, 4, 1, 0]
    assert pool.lookup("h1") is blocks[1] and blocks[1].holds(blocks[0].cache_id, (3, 4), "t:a")
    assert not blocks[1].holds(0, (3, 4), "t:a")


def test_touch_takes_an_idle_block_off_the_queue_and_taking_a_cached_block_evicts_it() -> None:
    pool = BlockPool(2)
    block = pool.get_new_block()
    pool.cache(block, "h", (7,), "t:a", 0)
    pool.free_blocks([block.block_id])
    pool.touch(block)
    assert pool.free_block_ids() == [1] and block.ref_count == 1
    pool.free_blocks([block.block_id])
    assert pool.free_block_ids() == [1, 0]
    pool.get_new_block()
    again = pool.get_new_block()
    assert again is block and pool.lookup("h") is None and pool.num_evictions == 1
    assert block.cache_id == 0 and block.token_ids == ()
    with pytest.raises(KeyError):
        pool.get_new_block()


def test_reset_cache_forgets_every_hash() -> None:
    pool = BlockPool(2)
    block = pool.get_new_block()
    pool.cache(block, "h", (7,), "t:a", 0)
    pool.reset_cache()
    assert pool.lookup("h") is None and pool.num_cached_blocks == 0 and block.cache_id == 0
