"""Deterministic fairness simulator: the real planner, block manager and queues; a cost model
in place of the GPU (no torch).

Reproduces the setups of the VTC paper (Sheng et al., OSDI 2024) on fairgate's own code:
two backlogged tenants with equal and with 1:2 weights, a tenant flooding at 4x another's
rate, a tenant that comes and goes, each under the fair queue and under FCFS; and six
interactive tenants near capacity with and without a TTFT objective (the worst tenant's p99
TTFT; the gap bound plus the objective's slack); and the live bench's one engine
(bench/fairness_live.py's limits, the engine's fairness preemption, a CPU-like step cost): the
light tenant's TTFT under the flood over alone, with the fair queue's active lead and lifted
level (`one_engine_*`; no prefix cache here, so a preempted request recomputes all it had,
which the engine's cache mostly spares it: throughput against FCFS reads low). Prints each
tenant's service over time, the largest service gap between backlogged tenants against the
paper's bound 2*max(w_in*L_in, w_out*M) (plus the fair queue's active lead), TTFT p50/p99 per
tenant; the last line is JSON.

    python bench/fairness_sim.py [--duration 60] [--seed 0]

Service is counted the way the queue charges it: prompt tokens when their prefill chunk is
scheduled (first computation only), w_out per generated token; gaps compare service divided
by weight. Arrivals are Poisson with per-tenant seeded generators, so runs repeat exactly.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from itertools import combinations
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # last: its kernels/ would shadow HF's (tests/conftest.py)

from fairgate.backends.local.kv_cache.block_manager import BlockManager  # noqa: E402
from fairgate.scheduler.fair_preemption import FairPreemption, FairPreemptionConfig  # noqa: E402
from fairgate.scheduler.fair_queue import FairQueue  # noqa: E402
from fairgate.scheduler.fairness import FairnessConfig, FairnessWeights  # noqa: E402
from fairgate.scheduler.plan import StepPlan  # noqa: E402
from fairgate.scheduler.queue import FCFSQueue, WaitQueue  # noqa: E402
from fairgate.scheduler.request import RequestStatus, SchedRequest  # noqa: E402
from fairgate.scheduler.scheduler import Scheduler, SchedulerConfig  # noqa: E402


@dataclass(slots=True)
class CostModel:
    """Seconds per engine step: a fixed launch cost plus a cost per batched token. The
    defaults mimic a small model on a GPU, where a step is mostly fixed cost (weights read
    once per step) and a full 512-token step costs about twice an almost empty one."""

    step_s: float = 0.015
    token_s: float = 0.00004

    def step_time(self, plan: StepPlan) -> float:
        return self.step_s + self.token_s * plan.num_batched_tokens


@dataclass(slots=True)
class TenantLoad:
    name: str
    rate: float  # requests per second while active
    weight: float = 1.0
    prompt: tuple[int, int] = (64, 192)  # uniform length range, tokens
    output: tuple[int, int] = (32, 96)
    windows: tuple[tuple[float, float], ...] = ()  # active periods; () = the whole run
    priority: int = 1  # class rank, 0 = highest


@dataclass(slots=True)
class Scenario:
    name: str
    tenants: list[TenantLoad]
    duration: float


@dataclass(slots=True)
class SimConfig:
    max_num_seqs: int = 32
    max_num_batched_tokens: int = 512
    num_blocks: int = 1024
    block_size: int = 16
    cost: CostModel = field(default_factory=CostModel)
    fairness: FairnessConfig = field(default_factory=FairnessConfig)
    seed: int = 0
    samples: int = 8  # rows of the service-over-time table
    # the engine's fairness preemption (scheduler/fair_preemption.py, on by default in the
    # engine); off for the VTC paper's setups, which measure the queue alone
    fair_preemption: bool = False


@dataclass(slots=True)
class SimResult:
    scenario: str
    queue: str
    timeline: list[tuple[float, dict[str, float]]]  # (time, cumulative service per tenant)
    # (arrival, TTFT) per tenant; unserved requests count with (end - arrival), a lower bound
    ttft_at: dict[str, list[tuple[float, float]]]
    service: dict[str, float]
    max_gap: float  # largest change of the weighted service difference of a backlogged pair
    share_error: float | None  # |(S_b/w_b)/(S_a/w_a) - 1| over the longest backlogged stretch
    generated_tokens: int
    sim_time: float
    deadline_picks: int = 0  # admissions a TTFT objective moved ahead of the counters' order

    @property
    def ttft(self) -> dict[str, list[float]]:
        return {n: [t for _, t in v] for n, v in self.ttft_at.items()}

    def first_ttft_after(self, tenant: str, start: float) -> float:
        """TTFT of the tenant's first request arriving at or after `start`."""
        return min((a, t) for a, t in self.ttft_at[tenant] if a >= start)[1]

    @property
    def throughput(self) -> float:
        return self.generated_tokens / self.sim_time if self.sim_time else 0.0


def vtc_bound(scenario: Scenario, cfg: SimConfig) -> float:
    """2*max(w_in*L_in, w_out*M) + the active lead: L_in the longest prompt chunk, M the step's
    token capacity; a returning tenant starts up to `active_lead` below the others."""
    m = cfg.max_num_batched_tokens
    l_in = min(max(t.prompt[1] for t in scenario.tenants), m)
    fc = cfg.fairness
    return 2 * max(fc.input_weight * l_in, fc.output_weight * m) + fc.active_lead


def arrivals(scenario: Scenario, seed: int) -> list[tuple[float, str, int, int]]:
    """(time, tenant, prompt length, output length), sorted; crc32 keeps seeds stable."""
    out = []
    for load in scenario.tenants:
        rng = random.Random(zlib.crc32(f"{seed}:{load.name}".encode()))
        for start, end in load.windows or ((0.0, scenario.duration),):
            t = start
            while (t := t + rng.expovariate(load.rate)) < end:
                out.append((t, load.name, rng.randint(*load.prompt), rng.randint(*load.output)))
    return sorted(out)


class GapTracker:
    """Weighted service differences of every pair of tenants while both are backlogged."""

    def __init__(self, weights: dict[str, float]) -> None:
        self.weights = weights
        self.max_gap = 0.0
        # pair -> [lo, hi, start service a, start service b, last a, last b]
        self._open: dict[tuple[str, str], list[float]] = {}
        self._longest: dict[tuple[str, str], tuple[float, float]] = {}  # pair -> (da, db)

    def observe(self, backlogged: list[str], service: dict[str, float]) -> None:
        alive = set()
        for a, b in combinations(sorted(backlogged), 2):
            sa, sb = service[a], service[b]
            d = sa / self.weights[a] - sb / self.weights[b]
            st = self._open.setdefault((a, b), [d, d, sa, sb, sa, sb])
            st[0], st[1], st[4], st[5] = min(st[0], d), max(st[1], d), sa, sb
            self.max_gap = max(self.max_gap, st[1] - st[0])
            alive.add((a, b))
        for pair in [p for p in self._open if p not in alive]:
            self._close(pair)

    def _close(self, pair: tuple[str, str]) -> None:
        st = self._open.pop(pair)
        da, db = st[4] - st[2], st[5] - st[3]
        if da + db > sum(self._longest.get(pair, (0.0, 0.0))):
            self._longest[pair] = (da, db)

    def share_error(self) -> float | None:
        for pair in list(self._open):
            self._close(pair)
        errors = []
        for (a, b), (da, db) in self._longest.items():
            if da > 0 and db > 0:
                errors.append(abs((db / self.weights[b]) / (da / self.weights[a]) - 1.0))
        return max(errors) if errors else None


def make_queue(kind: str, scenario: Scenario, cfg: SimConfig, clock: Callable[[], float]) -> WaitQueue:
    """`clock`: the simulated time (TTFT objectives read it)."""
    if kind == "fcfs":
        return FCFSQueue()
    weights = FairnessWeights({t.name: t.weight for t in scenario.tenants}, version=1)
    return FairQueue(cfg.fairness, weights, clock=clock)


@dataclass(slots=True)
class _Books:
    """What one simulated run counts per tenant while it steps."""

    names: list[str]
    service: dict[str, float]
    waiting: dict[str, int]
    ttft: dict[str, list[tuple[float, float]]]
    queued: set[str] = field(default_factory=set)
    generated: int = 0

    @classmethod
    def for_tenants(cls, names: list[str]) -> _Books:
        return cls(names, dict.fromkeys(names, 0.0), dict.fromkeys(names, 0), {n: [] for n in names})

    def scheduled(self, sched: Scheduler, plan: StepPlan, w_in: float) -> None:
        """Prefill service of a planned step; requests leaving or re-entering the queue."""
        for chunk in plan.chunks:
            r = sched.requests[chunk.request_id]
            if r.request_id in self.queued:
                self.queued.discard(r.request_id)
                self.waiting[r.tenant] -= 1
            if not r.num_preemptions:  # recompute is not service (and is not charged)
                start = chunk.start_pos
                self.service[r.tenant] += w_in * max(0, min(start + chunk.num_tokens, r.num_prompt_tokens) - start)
        for rid in plan.preempted:
            if rid not in self.queued:  # one admitted and taken back in the same step never left
                self.queued.add(rid)
                self.waiting[sched.requests[rid].tenant] += 1

    def sampled(self, sched: Scheduler, plan: StepPlan, w_out: float, now: float) -> None:
        """Decode service, first-token times and finished requests after a step ran."""
        for chunk in plan.chunks:
            r = sched.requests[chunk.request_id]
            if not chunk.sample or r.status is not RequestStatus.RUNNING:
                continue
            self.service[r.tenant] += w_out
            self.generated += 1
            if len(r.output_token_ids) == 1 and not r.num_preemptions:
                self.ttft[r.tenant].append((r.arrival_time, now - r.arrival_time))
            if len(r.output_token_ids) >= r.max_tokens:
                sched.finish_request(r.request_id)


def simulate(scenario: Scenario, kind: str, cfg: SimConfig | None = None) -> SimResult:
    """Run `scenario` under queue `kind` ("vtc" or "fcfs") until its duration ends."""
    cfg = cfg or SimConfig()
    kv = BlockManager(cfg.num_blocks, cfg.block_size, enable_prefix_caching=False)
    clock = [0.0]
    queue = make_queue(kind, scenario, cfg, lambda: clock[0])
    sched = Scheduler(
        SchedulerConfig(cfg.max_num_seqs, cfg.max_num_batched_tokens, max_model_len=1 << 16),
        kv,
        queue,
        FairPreemption(queue, FairPreemptionConfig()) if cfg.fair_preemption and isinstance(queue, FairQueue) else None,
    )
    names = [t.name for t in scenario.tenants]
    ranks = {t.name: t.priority for t in scenario.tenants}
    tracker = GapTracker({t.name: t.weight for t in scenario.tenants})
    books = _Books.for_tenants(names)
    timeline: list[tuple[float, dict[str, float]]] = []
    next_sample, sample_every = 0.0, scenario.duration / cfg.samples
    pending = arrivals(scenario, cfg.seed)
    i, now = 0, 0.0

    while now < scenario.duration:
        while i < len(pending) and pending[i][0] <= now:
            t, tenant, n_in, n_out = pending[i]
            rid = f"{tenant}-{i}"
            sched.add_request(SchedRequest(rid, [(i + k) % 997 for k in range(n_in)], n_out,
                                           tenant=tenant, priority=ranks[tenant], arrival_time=t))
            books.queued.add(rid)
            books.waiting[tenant] += 1
            i += 1
        clock[0] = now
        plan = sched.schedule() if sched.has_unfinished_requests() else StepPlan()
        if plan.is_empty:  # idle: jump to the next arrival
            if i == len(pending):
                break
            now = pending[i][0]
            continue
        books.scheduled(sched, plan, cfg.fairness.input_weight)
        now += cfg.cost.step_time(plan)
        sched.update_from_output(plan, {c.request_id: 7 for c in plan.chunks if c.sample})
        books.sampled(sched, plan, cfg.fairness.output_weight, now)
        tracker.observe([n for n in names if books.waiting[n]], books.service)
        if now >= next_sample:
            timeline.append((now, dict(books.service)))
            next_sample += sample_every

    for r in sched.requests.values():  # starved requests count too, as a lower bound
        if not r.output_token_ids:
            books.ttft[r.tenant].append((r.arrival_time, now - r.arrival_time))
    return SimResult(scenario.name, kind, timeline, books.ttft, books.service, tracker.max_gap,
                     tracker.share_error(), books.generated, now, getattr(sched.queue, "deadline_picks", 0))


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(-(-q * len(ordered) // 100)) - 1))]


def scenarios(duration: float) -> list[Scenario]:
    """The VTC paper's setups. Capacity with the default config is about 26 requests/s
    (1,700 generated tokens/s), so each backlogged setup offers more than that, and the
    flood offers 30/s of which the light tenant's 6/s is well under its fair half."""
    d = duration
    return [
        Scenario("equal", [TenantLoad("a", 20), TenantLoad("b", 20)], d),
        Scenario("weighted_1_2", [TenantLoad("a", 20), TenantLoad("b", 20, weight=2.0)], d),
        Scenario("flood_4x", [TenantLoad("light", 6), TenantLoad("flood", 24)], d),
        Scenario("on_off", [TenantLoad("a", 30),
                            TenantLoad("b", 20, windows=((0, d / 4), (d / 2, 3 * d / 4)))], d),
    ]


def classes(duration: float) -> Scenario:
    """An interactive tenant and a batch tenant, both offering more than the whole engine."""
    return Scenario("classes", [TenantLoad("inter", 40, priority=0),
                                TenantLoad("batch", 40, priority=2)], duration)


def interactive_tenants(duration: float) -> Scenario:
    """Six interactive tenants at 4 requests/s each: about 90% of capacity, so the queue is
    short but never empty and the counters' round robin decides who waits (TTFT objectives)."""
    return Scenario("six_inter", [TenantLoad(f"t{i}", 4.0, priority=0) for i in range(6)], duration)


def with_objective(cfg: SimConfig, seconds: float = 1.0) -> SimConfig:
    """`cfg` with a TTFT objective for the interactive class."""
    return replace(cfg, fairness=replace(cfg.fairness, ttft_objectives={0: seconds}))


def worst_p99(result: SimResult) -> float:
    """The worst tenant's p99 TTFT."""
    return max(percentile(v, 99) for v in result.ttft.values())


def one_engine_config(active_lead: float | None = None) -> SimConfig:
    """The live bench's engine (bench/fairness_live.py: 8 slots, a 256-token step budget, the
    fairness preemption on) with a CPU-like step cost: 4 ms plus 0.45 ms a token, so a step of
    eight decodes and a 24-token prefill takes about 18 ms, as on a 2-core Zen 3 box."""
    fairness = FairnessConfig() if active_lead is None else FairnessConfig(active_lead=active_lead)
    return SimConfig(max_num_seqs=8, max_num_batched_tokens=256, num_blocks=256,
                     cost=CostModel(step_s=0.004, token_s=0.00045), fairness=fairness, fair_preemption=True)


def one_engine(duration: float, flood_returns: bool = False, capacity: float = 36.0) -> tuple[Scenario, Scenario]:
    """The live bench's loads on `one_engine_config`: a light tenant at 0.3 of `capacity`
    requests/s and a flooder at 1.2, 24-token prompts, 16 tokens out (and the light tenant
    alone). `flood_returns`: the flooder runs 5 s, idles 15 s, then floods to the end."""
    light = TenantLoad("light", 0.3 * capacity, prompt=(24, 24), output=(16, 16))
    windows = ((0.0, 5.0), (20.0, duration)) if flood_returns else ()
    flood = TenantLoad("flood", 1.2 * capacity, prompt=(24, 24), output=(16, 16), windows=windows)
    return (Scenario("one_engine" + ("_return" if flood_returns else ""), [light, flood], duration),
            Scenario("one_engine_alone", [light], duration))


def one_engine_ratios(duration: float, cfg: SimConfig, flood_returns: bool = False) -> dict[str, float]:
    """The light tenant's p50 / p99 TTFT under the flood over alone (after the flood's return
    when `flood_returns`), and the flood's throughput over FCFS's."""
    both, alone = one_engine(duration, flood_returns)
    fair, fcfs, solo = simulate(both, "vtc", cfg), simulate(both, "fcfs", cfg), simulate(alone, "vtc", cfg)
    since = 20.0 if flood_returns else 0.0
    light = [t for a, t in fair.ttft_at["light"] if a >= since]
    return {"p50": percentile(light, 50) / percentile(solo.ttft["light"], 50),
            "p99": percentile(light, 99) / percentile(solo.ttft["light"], 99),
            "throughput": fair.throughput / fcfs.throughput}


def light_alone(duration: float) -> Scenario:
    return Scenario("light_alone", [TenantLoad("light", 6)], duration)


def run_all(duration: float, cfg: SimConfig | None = None) -> tuple[list[SimResult], dict]:
    """Every scenario under both queues; returns the results and the summary (the JSON)."""
    cfg = cfg or SimConfig()
    results = [simulate(s, k, cfg) for s in scenarios(duration) for k in ("vtc", "fcfs")]
    alone = simulate(light_alone(duration), "vtc", cfg)
    # priority classes: the batch class gets its reserved share, and nothing without one
    reserved = simulate(classes(duration), "vtc", cfg)
    unreserved = simulate(classes(duration), "vtc",
                          replace(cfg, fairness=replace(cfg.fairness, reserved_shares={})))
    # TTFT objective: the interactive tenants' worst p99 with and without one
    plain_6 = simulate(interactive_tenants(duration), "vtc", cfg)
    due_6 = simulate(interactive_tenants(duration), "vtc", with_objective(cfg))
    # the live bench's one engine: the light tenant with its active lead, and lifted level
    lead, level = one_engine_ratios(duration, one_engine_config()), one_engine_ratios(duration, one_engine_config(0.0))
    back = one_engine_ratios(duration, one_engine_config(), flood_returns=True)
    by = {(r.scenario, r.queue): r for r in results}
    backlogged = ("equal", "weighted_1_2", "on_off")
    flood_v, flood_f = by["flood_4x", "vtc"], by["flood_4x", "fcfs"]
    bound = min(vtc_bound(s, cfg) for s in scenarios(duration))
    d2 = duration / 2  # the on_off tenant's return
    summary = {
        "vtc_max_gap": max(r.max_gap for r in results if r.queue == "vtc"),
        "vtc_bound": bound,
        "fcfs_max_gap": max(r.max_gap for r in results if r.queue == "fcfs"),
        "weight_share_error": max(by[s, "vtc"].share_error or 0.0 for s in backlogged),
        "fcfs_weight_share_error": max(by[s, "fcfs"].share_error or 0.0 for s in backlogged),
        "light_alone_ttft_p99_s": percentile(alone.ttft["light"], 99),
        "vtc_light_ttft_p99_s": percentile(flood_v.ttft["light"], 99),
        "fcfs_light_ttft_p99_s": percentile(flood_f.ttft["light"], 99),
        # the returning tenant's first request: VTC serves it at once, FCFS queues it behind
        # everything the other tenant piled up meanwhile
        "vtc_return_ttft_s": by["on_off", "vtc"].first_ttft_after("b", d2),
        "fcfs_return_ttft_s": by["on_off", "fcfs"].first_ttft_after("b", d2),
        "vtc_throughput_tok_s": flood_v.throughput,
        "fcfs_throughput_tok_s": flood_f.throughput,
        "batch_reserved_share": cfg.fairness.reserved_shares.get(2, 0.0),
        "batch_share": reserved.service["batch"] / sum(reserved.service.values()),
        "batch_share_unreserved": unreserved.service["batch"] / sum(unreserved.service.values()),
        "objective_worst_ttft_p99_s": worst_p99(due_6),
        "no_objective_worst_ttft_p99_s": worst_p99(plain_6),
        "objective_max_gap": due_6.max_gap,
        "objective_gap_bound": vtc_bound(interactive_tenants(duration), cfg) + cfg.fairness.deadline_slack,
        "objective_deadline_picks": due_6.deadline_picks,
        "one_engine_light_p99_vs_alone": lead["p99"],
        "one_engine_light_p50_vs_alone": lead["p50"],
        "one_engine_throughput_vs_fcfs": lead["throughput"],
        "one_engine_level_light_p99_vs_alone": level["p99"],
        "one_engine_level_light_p50_vs_alone": level["p50"],
        "one_engine_flood_returns_light_p99_vs_alone": back["p99"],
    }
    summary = {k: round(v, 4) for k, v in summary.items()}
    summary["ok"] = (
        summary["vtc_max_gap"] <= bound
        and summary["weight_share_error"] <= 0.10
        and summary["fcfs_light_ttft_p99_s"] >= 5 * summary["vtc_light_ttft_p99_s"]
        and summary["objective_max_gap"] <= summary["objective_gap_bound"]
    )
    reserved.queue, unreserved.queue = "vtc", "vtc-0"  # (no reserved share)
    due_6.queue = "vtc+d"  # (with the interactive TTFT objective)
    return results + [alone, reserved, unreserved, plain_6, due_6], summary


def print_report(results: list[SimResult], summary: dict) -> None:
    for scenario in dict.fromkeys(r.scenario for r in results):
        runs = [r for r in results if r.scenario == scenario]
        tenants = list(runs[0].service)
        print(f"\n== {scenario}: cumulative service (cost units) over time")
        print(f"{'t (s)':>7} " + " ".join(f"{r.queue + ':' + t:>14}" for r in runs for t in tenants))
        for row in range(max(len(r.timeline) for r in runs)):
            cells = []
            for r in runs:
                t, svc = r.timeline[min(row, len(r.timeline) - 1)]
                cells += [f"{svc[n]:>14.0f}" for n in tenants]
            print(f"{runs[0].timeline[min(row, len(runs[0].timeline) - 1)][0]:>7.1f} " + " ".join(cells))
    print(f"\n{'scenario':<13}{'queue':<6}{'tenant':<7}{'reqs':>6}{'ttft p50':>10}{'ttft p99':>10}"
          f"{'service':>10}{'max gap':>9}{'share err':>10}{'tok/s':>8}")
    for r in results:
        for n, ttft in r.ttft.items():
            err = "-" if r.share_error is None else f"{r.share_error:.3f}"
            print(f"{r.scenario:<13}{r.queue:<6}{n:<7}{len(ttft):>6}{percentile(ttft, 50):>10.3f}"
                  f"{percentile(ttft, 99):>10.3f}{r.service[n]:>10.0f}{r.max_gap:>9.0f}{err:>10}"
                  f"{r.throughput:>8.0f}")
    print(f"\nVTC max gap {summary['vtc_max_gap']:.0f} vs bound {summary['vtc_bound']:.0f} "
          f"(FCFS {summary['fcfs_max_gap']:.0f}); light p99 TTFT alone "
          f"{summary['light_alone_ttft_p99_s']:.3f}s, with flooder VTC "
          f"{summary['vtc_light_ttft_p99_s']:.3f}s, FCFS {summary['fcfs_light_ttft_p99_s']:.3f}s")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=float, default=60.0, help="simulated seconds per run")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    results, summary = run_all(args.duration, SimConfig(seed=args.seed))
    print_report(results, summary)
    print(json.dumps(summary))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
