"""Quotas on a real three-node Redis Cluster started by the test: every script's keys share one
slot (hash tag = the tenant scope), tenants spread over the nodes, and the store keeps the
contract (limits, settle, renew, stale config) through redis-py's cluster client."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot

from fairgate.gateway.quota import QuotaDenied, ScopeLimits, StaleConfig
from fairgate.gateway.quota.redis_store import RedisQuotaStore, hash_tag
from tests.helpers.redis_cluster import missing_reason, redis_cluster

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")


@pytest.fixture(scope="module")
def cluster_urls(tmp_path_factory):
    with redis_cluster(tmp_path_factory.mktemp("redis-cluster")) as urls:
        yield urls


def test_hash_tag_is_the_tenant_scope():
    assert hash_tag([ScopeLimits("k:key1"), ScopeLimits("t:ten")]) == "t:ten"
    assert hash_tag([ScopeLimits("k:key1")]) == "k:key1"
    # the tagged keys of one tenant share a slot whatever follows the tag
    assert key_slot(b"fg:{t:ten}:q:t:ten:rpm") == key_slot(b"fg:{t:ten}:q:k:key1:tpmv") == key_slot(b"fg:{t:ten}:r:x")


async def test_quota_contract_on_a_cluster(cluster_urls):
    prefix = f"fgc-{uuid.uuid4().hex[:8]}"
    store = RedisQuotaStore(cluster_urls[1], prefix=prefix, reservation_ttl_s=2, cluster=True)
    rc = RedisCluster.from_url(cluster_urls[0])
    try:
        v = await store.config_bus().version()
        tenants = [f"ten{i}" for i in range(12)]
        for t in tenants:  # a tenant scope and a key scope in one script: one slot
            lims = [ScopeLimits(f"t:{t}", requests_per_minute=2, daily_tokens=100), ScopeLimits(f"k:{t}-key",
                                                                                                max_concurrent=1)]
            await store.reserve(f"{t}-r1", lims, 10, 0.0, v)
            with pytest.raises(QuotaDenied) as denied:  # the key's one concurrent slot is taken
                await store.reserve(f"{t}-r2", lims, 10, 0.0, v)
            assert denied.value.limit == "max_concurrent" and denied.value.scope == "key"
        counters = await store.counters("t:ten0")
        assert counters["requests"] == 1 and counters["daily_tokens"] == 10
        assert (await store.counters("k:ten0-key", tag="t:ten0"))["concurrent"] == 1
        # every key one tenant's scripts wrote sits in that tenant's slot; the tenants span nodes
        slots = {}
        for t in tenants:
            keys = [k async for k in rc.scan_iter(match=f"{prefix}:{{t:{t}}}:*")]
            assert len(keys) >= 4
            assert {key_slot(k) for k in keys} == {key_slot(store.base(f"t:{t}").encode())}
            slots[t] = key_slot(keys[0])
        owners = {rc.get_node_from_key(store.base(f"t:{t}")).name for t in tenants}
        assert len(owners) >= 2, slots
        # the heartbeat keeps the reservations past their 2 s TTL, one renew per slot
        await asyncio.sleep(3)
        assert (await store.counters("k:ten3-key", tag="t:ten3"))["concurrent"] == 1
        # settle: the slot comes back, usage reconciled
        assert await store.settle("ten0-r1", 4, 0.0) is True
        assert await store.settle("ten0-r1", 4, 0.0) is False
        c = await store.counters("t:ten0")
        assert c["daily_tokens"] == 4 and (await store.counters("k:ten0-key", tag="t:ten0"))["concurrent"] == 0
        # an admin change (the version in its own slot) makes an old caller stale
        await store.config_bus().bump()
        with pytest.raises(StaleConfig):
            await store.reserve("late", [ScopeLimits("t:ten0")], 1, 0.0, v)
        await store.reserve("fresh", [ScopeLimits("t:ten0")], 1, 0.0, v + 1)
    finally:
        await store.aclose()
        keys = [k async for k in rc.scan_iter(match=f"{prefix}:*")]
        for k in keys:
            await rc.delete(k)
        await rc.aclose()
