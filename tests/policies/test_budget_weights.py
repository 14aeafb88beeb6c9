"""Near-budget weight scaling as a pure decision."""

from __future__ import annotations

from fairgate.policies.budget_weights import NEAR_BUDGET_FACTOR, budget_scaled, used_fraction


def test_used_fraction_is_the_largest_of_the_set_budgets() -> None:
    counters = {"daily_tokens": 850, "monthly_tokens": 900, "monthly_cost": 1_900_000}
    assert used_fraction(counters, {"daily_tokens": 1000}, 1_000_000) == 0.85
    assert used_fraction(counters, {"daily_tokens": 1000, "monthly_cost": 2.0}, 1_000_000) == 0.95
    assert used_fraction(counters, {"daily_tokens": None, "monthly_tokens": 0}, 1_000_000) == 0.0
    assert used_fraction({}, {"daily_tokens": 10}, 1_000_000) == 0.0


def test_only_tenants_at_the_threshold_are_scaled() -> None:
    weights = {"a": 2.0, "b": 1.0, "c": 3.0}
    assert budget_scaled(weights, {"a": 0.9, "b": 0.89}) == {"a": 2.0 * NEAR_BUDGET_FACTOR, "b": 1.0, "c": 3.0}
