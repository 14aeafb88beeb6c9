"""Near-budget fairness weights: a tenant that has used `NEAR_BUDGET` of a daily or monthly token
(or cost) budget gets `NEAR_BUDGET_FACTOR` times its weight. It keeps being served, but yields
to tenants with room left, rather than burning the rest of its budget at full speed.

Pure decisions: the gateway reads the counters and pushes the weights (gateway.config.fairness).
"""

from __future__ import annotations

from collections.abc import Mapping

NEAR_BUDGET = 0.9
NEAR_BUDGET_FACTOR = 0.5
BUDGET_FIELDS = ("daily_tokens", "monthly_tokens", "monthly_cost")


def used_fraction(counters: Mapping[str, int], limits: Mapping[str, float | None], cost_unit: int) -> float:
    """The largest used fraction of any set budget (0.0 with none set). Counters hold tokens and,
    for `monthly_cost`, cost in 1/`cost_unit` of a currency unit."""
    fractions = [
        counters.get(name, 0) / (limit * (cost_unit if name == "monthly_cost" else 1))
        for name in BUDGET_FIELDS
        if (limit := limits.get(name))
    ]
    return max(fractions, default=0.0)


def budget_scaled(weights: Mapping[str, float], used: Mapping[str, float]) -> dict[str, float]:
    """Weights with the near-budget tenants' lowered."""
    return {t: w * NEAR_BUDGET_FACTOR if used.get(t, 0.0) >= NEAR_BUDGET else w for t, w in weights.items()}
