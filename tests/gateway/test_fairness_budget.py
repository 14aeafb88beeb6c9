"""Near-budget tenants get a lower fairness weight: usage read from a real quota store."""

from __future__ import annotations

from fairgate.gateway.config.fairness import budget_used
from fairgate.gateway.quota import ScopeLimits
from fairgate.gateway.quota.memory import MemoryQuotaStore
from fairgate.policies.budget_weights import NEAR_BUDGET_FACTOR, budget_scaled


async def spend(store: MemoryQuotaStore, tenant: str, tokens: int, cost: float = 0.0) -> None:
    rid = f"{tenant}-{tokens}-{cost}"
    await store.reserve(rid, [ScopeLimits(f"t:{tenant}")], tokens, cost, await store.config_bus().version())
    await store.settle(rid, tokens, cost)


async def test_budget_use_is_the_largest_fraction_of_any_budget() -> None:
    store = MemoryQuotaStore()
    budgets = {"acme": {"daily_tokens": 1000, "monthly_tokens": None, "monthly_cost": None},
               "globex": {"daily_tokens": None, "monthly_tokens": 10_000, "monthly_cost": 2.0},
               "idle": {"daily_tokens": 500}}
    await spend(store, "acme", 850)
    await spend(store, "globex", 100, cost=1.9)
    used = await budget_used(store, budgets)
    assert used == {"acme": 0.85, "globex": 0.95, "idle": 0.0}
    weights = {"acme": 2.0, "globex": 1.0, "idle": 1.0, "free": 3.0}
    assert budget_scaled(weights, used) == {
        "acme": 2.0, "globex": NEAR_BUDGET_FACTOR, "idle": 1.0, "free": 3.0}
    await spend(store, "acme", 50)  # 900 of 1000: at the threshold
    assert budget_scaled(weights, await budget_used(store, budgets))["acme"] == 2.0 * NEAR_BUDGET_FACTOR
