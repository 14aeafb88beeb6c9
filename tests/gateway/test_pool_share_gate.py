"""gateway.request.pool_share without Redis: the single-process gate and the cap from a pool's replicas
(the fleet-wide path is tests/e2e/test_pool_share.py)."""

from __future__ import annotations


async def test_memory_share_gate_and_the_cap():
    from fairgate.backends.pool import PoolBackend, ReplicaSpec
    from fairgate.gateway.request.pool_share import MemoryShareGate, share_cap

    gate = MemoryShareGate()
    assert await gate.acquire("p", "t", "r1", 2) and await gate.acquire("p", "t", "r2", 2)
    assert not await gate.acquire("p", "t", "r3", 2)
    assert await gate.acquire("p", "other", "r4", 2)  # per tenant
    await gate.release("r1")
    await gate.release("r1")  # twice: counted once
    assert await gate.in_flight("p", "t") == 1 and await gate.acquire("p", "t", "r5", 2)
    import httpx

    async with httpx.AsyncClient() as http:
        pool = PoolBackend("p", "local", [ReplicaSpec("a", "http://127.0.0.1:9/v1"),
                                          ReplicaSpec("b", "http://127.0.0.1:9/v1")], lambda spec: None, http)
        assert share_cap(pool, 0.25, 4) == 2 and share_cap(pool, 0.01, 4) == 1
        pool.replicas["a"].healthy = False  # an ejected replica takes nothing: the cap shrinks
        assert share_cap(pool, 0.5, 4) == 2


def test_the_share_follows_the_tenant_weight():
    from pytest import approx

    from fairgate.gateway.request.pool_share import weighted_share

    weights = {"gold": 3.0, "std": 1.0, "low": 0.5, "mid": 1.5}  # mean 1.5
    assert weighted_share(0.3, "gold", weights) == approx(0.6)
    assert weighted_share(0.3, "std", weights) == approx(0.2)
    assert weighted_share(0.3, "mid", weights) == approx(0.3)
    assert weighted_share(0.6, "gold", weights) == 1.0  # never over the whole pool
    assert weighted_share(0.3, "unknown", weights) == 0.3 and weighted_share(0.3, "gold", {}) == 0.3
