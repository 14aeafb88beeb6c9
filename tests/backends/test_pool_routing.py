"""Pool routing (pure) and prefix keys: affinity is stable and salted exactly as the engine
salts its cache; a replica over its load bound gives way to the least loaded."""

from __future__ import annotations

from fairgate.backends.base import GenerationRequest
from fairgate.backends.local.kv_cache.block_manager import BlockManager
from fairgate.backends.pool_prefix import PrefixKeyer
from fairgate.backends.pool_routing import ReplicaLoad, choose, load_bound, rendezvous_order
from fairgate.scheduler.request import SchedRequest

NAMES = ["r0", "r1", "r2"]


def loads(*outstanding: int, kv: tuple[float | None, ...] = (None, None, None)) -> list[ReplicaLoad]:
    return [ReplicaLoad(n, o, k) for n, o, k in zip(NAMES, outstanding, kv, strict=True)]


def test_rendezvous_is_stable_and_moves_only_the_leavers_keys() -> None:
    keys = [bytes([i]) * 8 for i in range(200)]
    home = {k: rendezvous_order(k, NAMES)[0] for k in keys}
    assert home == {k: rendezvous_order(k, list(reversed(NAMES)))[0] for k in keys}  # order-free
    assert set(home.values()) == set(NAMES)
    after = {k: rendezvous_order(k, ["r0", "r2"])[0] for k in keys}
    assert all(after[k] == home[k] for k in keys if home[k] != "r1")  # only r1's keys move


def test_affinity_until_the_load_bound_then_least_loaded() -> None:
    key = b"tenant-a-system-prompt"
    home = rendezvous_order(key, NAMES)[0]
    idle = choose("affinity", key, loads(0, 0, 0))
    assert (idle.order[0], idle.reason) == (home, "affinity")
    busy = [ReplicaLoad(n, 6 if n == home else 1, None) for n in NAMES]
    assert load_bound(busy, 1.25) == 4  # ceil(1.25 * 9 / 3)
    assert load_bound(busy, 1.25, load_slack=4) == 5  # the least loaded holds 1: 1 + 4
    assert choose("affinity", key, [ReplicaLoad(n, 4 if n == home else 1) for n in NAMES],
                  load_slack=4).reason == "affinity"  # 4 < 5: within the slack
    spill = choose("affinity", key, busy)
    assert spill.reason == "spill" and spill.order[0] != home and spill.order[0] == sorted(
        n for n in NAMES if n != home)[0]
    full = [ReplicaLoad(n, 0, 0.95 if n == home else 0.1) for n in NAMES]
    assert choose("affinity", key, full, max_kv_usage=0.9).reason == "spill"


def test_round_robin_and_least_loaded() -> None:
    firsts = [choose("round_robin", b"", loads(0, 0, 0), counter=i).order[0] for i in range(6)]
    assert firsts == ["r0", "r1", "r2", "r0", "r1", "r2"]
    assert choose("least_loaded", b"", loads(3, 1, 2)).order == ("r1", "r2", "r0")


def test_prefix_key_is_the_engines_block_hash_per_salt() -> None:
    prompt = list(range(100, 180))  # 5 full blocks of 16
    keyer = PrefixKeyer(None, block_size=16, blocks=4)

    def req(tokens: list[int], salt: str | None, tenant: str = "t") -> GenerationRequest:
        return GenerationRequest.from_body("x", "completion", {"prompt": tokens}, tenant=tenant, cache_salt=salt)

    bm = BlockManager(64, 16)
    engine_hash = bm._block_hashes(SchedRequest("a", prompt, 1, tenant="t", cache_salt="acme"), 4)[3]
    assert keyer.key(req(prompt, "acme")) == engine_hash
    unsalted = bm._block_hashes(SchedRequest("b", prompt, 1, tenant="t"), 4)[3]
    assert keyer.key(req(prompt, None)) == unsalted
    assert keyer.key(req(prompt, "globex")) != engine_hash  # another tenant, another home
    assert keyer.key(req(prompt[:64] + [1, 2, 3], "acme")) == engine_hash  # same first blocks
    assert keyer.key(req([5, 6], "acme")) == keyer.key(req([7], "acme"))  # short: the tenant's home
