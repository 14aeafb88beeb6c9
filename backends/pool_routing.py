"""Which replica of a pool takes a request: prefix affinity bounded by load.

Pure decisions, no I/O (the pool in backends/pool.py measures; this module chooses).

- `affinity`: rendezvous (highest-random-weight) hashing of the request's prefix key over the
  replicas' names, so every gateway replica sends a prefix to the same engine without talking
  to the others, and a replica leaving moves only its own prefixes. The choice is bounded by
  load (consistent hashing with bounded loads, Mirrokni et al. 2018): a replica whose
  outstanding requests reach `load_factor` × the pool's mean (+1) — and at least `load_slack`
  more than the least loaded replica, so a handful of requests never scatters a prefix (the
  absolute threshold of SGLang's cache-aware router) — or whose KV cache is fuller than
  `max_kv_usage`, gives way to the least loaded replica.
- `round_robin`, `least_loaded` and `random`: the baselines benchmarks and tests compare against.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass
from typing import Literal

Policy = Literal["affinity", "round_robin", "least_loaded", "random"]
POLICIES: tuple[Policy, ...] = ("affinity", "round_robin", "least_loaded", "random")


@dataclass(slots=True, frozen=True)
class ReplicaLoad:
    """What routing knows of one routable replica: outstanding requests sent by this gateway
    and the KV-cache usage (0..1) last read from it (None: not known yet)."""

    name: str
    outstanding: int
    kv_usage: float | None = None


@dataclass(slots=True, frozen=True)
class PoolChoice:
    """The replicas to try, in order, and why the first was chosen (for metrics):
    `affinity` (the prefix's home), `spill` (home over its bound), `least_loaded`, `round_robin`."""

    order: tuple[str, ...]
    reason: str


def rendezvous_order(key: bytes, names: list[str]) -> list[str]:
    """Names by descending rendezvous weight of (key, name); stable across processes."""
    return sorted(names, key=lambda n: hashlib.blake2b(key + b"\x00" + n.encode(), digest_size=8).digest(),
                  reverse=True)


def load_bound(loads: list[ReplicaLoad], load_factor: float, load_slack: int = 0) -> int:
    """Outstanding requests at which a replica stops taking more by affinity."""
    total = sum(r.outstanding for r in loads) + 1
    relative = math.ceil(load_factor * total / len(loads))
    return max(1, relative, min(r.outstanding for r in loads) + load_slack)


def _least_loaded(loads: list[ReplicaLoad]) -> list[str]:
    return [r.name for r in sorted(loads, key=lambda r: (r.outstanding, r.kv_usage or 0.0, r.name))]


def choose(policy: Policy, key: bytes, loads: list[ReplicaLoad], *, counter: int = 0,
           load_factor: float = 1.25, max_kv_usage: float = 0.9, load_slack: int = 0) -> PoolChoice:
    """The try-order over `loads` (non-empty) for one request; `counter` drives round robin."""
    if policy == "round_robin":
        names = sorted(r.name for r in loads)
        i = counter % len(names)
        return PoolChoice(tuple(names[i:] + names[:i]), "round_robin")
    if policy == "random":  # seeded by the counter: a run can be replayed
        names = sorted(r.name for r in loads)
        random.Random(counter).shuffle(names)
        return PoolChoice(tuple(names), "random")
    least = _least_loaded(loads)
    if policy == "least_loaded":
        return PoolChoice(tuple(least), "least_loaded")
    order = rendezvous_order(key, [r.name for r in loads])
    by_name = {r.name: r for r in loads}
    home = by_name[order[0]]
    bound = load_bound(loads, load_factor, load_slack)
    if home.outstanding < bound and (home.kv_usage is None or home.kv_usage <= max_kv_usage):
        return PoolChoice(tuple(order), "affinity")
    first = least[0] if least[0] != home.name or len(least) == 1 else least[1]
    rest = [n for n in order if n != first]
    return PoolChoice((first, *rest), "spill")
