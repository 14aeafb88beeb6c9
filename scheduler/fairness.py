"""Fairness weights and their versions: the value the gateway pushes into every engine.

Plain Python. A `FairnessWeights` is immutable once built; replacing weights means building a
new one with a higher version, so a stale push (a slow HTTP call overtaken by a newer one)
can be recognised and dropped instead of undoing the newer change.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


def is_stale(version: int | None, current: int | None) -> bool:
    """The one stale-weights rule: a push older than the current version is ignored.

    The same version is accepted again (a re-push after an engine reconnect is harmless);
    None on either side (no version given, nothing applied yet) is never stale."""
    return version is not None and current is not None and version < current


def _check_weight(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"weight of {name!r} must be a finite number > 0, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class FairnessWeights:
    """Per-tenant weights at one version. A tenant not listed gets `default_weight`.

    A tenant with weight 2 receives twice the service of a weight-1 tenant while both are
    backlogged in the same priority class.
    """

    weights: Mapping[str, float] = field(default_factory=dict)
    version: int = 0
    default_weight: float = 1.0

    def __post_init__(self) -> None:
        # frozen: validate and copy once so callers cannot mutate our mapping afterwards
        checked = {str(t): _check_weight(str(t), w) for t, w in dict(self.weights).items()}
        object.__setattr__(self, "weights", checked)
        object.__setattr__(self, "default_weight", _check_weight("<default>", self.default_weight))
        if int(self.version) != self.version or self.version < 0:
            raise ValueError(f"version must be an integer >= 0, got {self.version!r}")
        object.__setattr__(self, "version", int(self.version))

    def weight_of(self, tenant: str) -> float:
        return self.weights.get(tenant, self.default_weight)

    def to_json(self) -> dict[str, Any]:
        """The wire form of `PUT /control/fairness` (and of the engine's status)."""
        return {
            "version": self.version,
            "default_weight": self.default_weight,
            "weights": dict(self.weights),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FairnessWeights:
        """Parse the wire form; raises ValueError with a user-facing message on bad input."""
        if not isinstance(data, Mapping):
            raise ValueError("body must be a JSON object")
        weights = data.get("weights", {})
        if not isinstance(weights, Mapping):
            raise ValueError("'weights' must be an object of tenant -> number")
        version = data.get("version", 0)
        if isinstance(version, bool) or not isinstance(version, int):
            raise ValueError("'version' must be an integer")
        default = data.get("default_weight", 1.0)
        if isinstance(default, bool) or not isinstance(default, int | float):
            raise ValueError("'default_weight' must be a number")
        for tenant, w in weights.items():
            if isinstance(w, bool) or not isinstance(w, int | float):
                raise ValueError(f"weight of {tenant!r} must be a number")
        return cls(weights=weights, version=version, default_weight=default)


# cost units a tenant served a moment ago starts below the least-served backlogged one (`FairnessConfig`)
DEFAULT_ACTIVE_LEAD = 1024.0


@dataclass(frozen=True, slots=True)
class FairnessConfig:
    """How service is priced and how priority classes share the engine.

    `input_weight` / `output_weight` are the VTC paper's w_p / w_q: an output token costs
    more than a prompt token because it needs a whole decode step. `reserved_shares[rank]` is
    the fraction of service a lower class (rank > 0) is guaranteed while it has waiting
    requests and a higher class is busy; `class_burst` caps how much unused reservation (in
    cost units) a class can bank, so an idle stretch never turns into a long monopoly later.

    `ttft_objectives[rank]`: the class's time-to-first-token objective in seconds (e.g. 1.0 for
    interactive). A waiting request of that class with no token yet is due once it has waited
    `due_fraction` of it; a due request goes ahead of the counters' order, earliest arrival first,
    when its tenant's counter is within `deadline_slack` cost units of the least-served
    backlogged tenant's. So among tenants the counters hold level anyway, the one about to miss
    its objective goes first, and the VTC bound on backlogged tenants' weighted service gap
    grows by at most `deadline_slack`.

    `active_lead` (cost units): a tenant that becomes backlogged again within `active_window_s`
    of its last service (a request of its still running, or just ended) is lifted to no more
    than this below the least backlogged counter, not level with it. It was not idle: it asks
    for less than its share, and max-min fairness serves such a tenant at once, so its next
    request goes ahead of a flooder's backlog and may take a slot back by the counter gap
    (fair_preemption.py) instead of waiting at its slot share. Idle time is still not banked: a
    tenant idle longer than the window (a flooder coming back) starts level. The lead is
    bounded, so the VTC bound grows by it and no more; with 0 every returning tenant starts
    level (the VTC paper's lift).
    """

    input_weight: float = 1.0
    output_weight: float = 2.0
    reserved_shares: Mapping[int, float] = field(default_factory=lambda: {1: 0.1, 2: 0.05})
    class_burst: float = 4096.0
    ttft_objectives: Mapping[int, float] = field(default_factory=dict)
    due_fraction: float = 0.5
    deadline_slack: float = 512.0
    active_lead: float = DEFAULT_ACTIVE_LEAD
    active_window_s: float = 1.0

    def __post_init__(self) -> None:
        _check_weight("input_weight", self.input_weight)
        _check_weight("output_weight", self.output_weight)
        shares = {int(r): float(s) for r, s in dict(self.reserved_shares).items()}
        if any(not 0.0 <= s < 1.0 for s in shares.values()) or sum(shares.values()) >= 1.0:
            raise ValueError("reserved shares must each be in [0, 1) and sum to less than 1")
        if shares.get(0, 0.0):
            raise ValueError("the highest class (rank 0) needs no reserved share")
        object.__setattr__(self, "reserved_shares", shares)
        if self.class_burst <= 0:
            raise ValueError("class_burst must be > 0")
        objectives = {int(r): float(s) for r, s in dict(self.ttft_objectives).items()}
        if any(not (math.isfinite(s) and s > 0) for s in objectives.values()):
            raise ValueError("TTFT objectives must be finite numbers of seconds > 0")
        object.__setattr__(self, "ttft_objectives", objectives)
        if not 0.0 < self.due_fraction <= 1.0 or not self.deadline_slack >= 0.0:
            raise ValueError("due_fraction must be in (0, 1] and deadline_slack >= 0")
        if not (math.isfinite(self.active_lead) and self.active_lead >= 0.0):
            raise ValueError("active_lead must be a finite number >= 0")
        if not (math.isfinite(self.active_window_s) and self.active_window_s >= 0.0):
            raise ValueError("active_window_s must be a finite number of seconds >= 0")
