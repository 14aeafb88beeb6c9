"""The real cost on a fixed synthetic usage history, checked against figures computed by hand.

History (UTC, 2026-11-30), window 08:00-12:00 (4 hours):

    backend  price          rows (tenant, ends at, in flight for, prompt, completion)
    gpu      $3.50/h,       ta 08:10:30 30 s 1000/200;  tb 08:10:50 40 s 2000/50;
             measured       ta 09:31:10 90 s 500/100;   ta 07:59:00 (before the window) 9999/9
             0.0005 s/prefill token, 0.02 s/decode step
    box      $2.00/h, no    ta 10:20:00 60 s 300/100
             measurement
    ext      list prices    tb 11:15:00 2 s 1000/500, $0.02 recorded
    spare    $1.00/h, since 10:00, no traffic

By hand:
- gpu: 4 h x 3.5 = $14. Busy minutes: 08:10 (both early rows), 09:29, 09:30, 09:31 = 4; idle
  236 of 240 minutes. Engine time: ta 1500 x 0.0005 + 300 x 0.02 = 6.75 s, tb 2000 x 0.0005 +
  50 x 0.02 = 2 s, of 8.75 s: ta pays 14 x 6.75 / 8.75 = 10.8, tb 3.2. Tokens 3500 + 350:
  $40,000 per 1M generated, 14 / 3850 x 1e6 = 3636.36... per 1M.
- box: $8, default weights (by tokens), all ta's; busy 10:19 only (it ended at 10:20:00 sharp).
- ext: $0.02 at list price, 0.02 / 1500 x 1e6 per 1M.
- spare: 2 h paid (registered at 10:00), $2, idle share 1, no tokens.
Rows by hour: ta 08:00 = 14 x (0.5 + 4) / 8.75 = 7.2; ta 09:00 = 14 x (0.25 + 2) / 8.75 = 3.6;
ta 10:00 = 8; tb 08:00 = 3.2; tb 11:00 = 0.02.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy.orm import Session

from fairgate.backends.local.engine.step_cost import StepCosts
from fairgate.gateway.billing.cost import HourlyPrice, busy_minutes
from fairgate.gateway.billing.reports import cost_report
from fairgate.gateway.store.db import make_engine, upgrade
from fairgate.gateway.store.tables import UsageRecord

DAY = datetime(2026, 11, 30)
START, END = DAY.replace(hour=8), DAY.replace(hour=12)
NOW = datetime(2026, 12, 1, 9)
PRICES = {"gpu": HourlyPrice(3.5, DAY), "box": HourlyPrice(2.0, datetime(2026, 11, 1)),
          "spare": HourlyPrice(1.0, DAY.replace(hour=10))}
WEIGHTS = {"gpu": StepCosts(0.0005, 0.02, 100, "regression"), "box": None, "spare": None}
HISTORY = [  # backend, tenant, ends at (h, m, s), in flight (s), prompt, completion, list cost
    ("gpu", "ta", (8, 10, 30), 30, 1000, 200, 0.0),
    ("gpu", "tb", (8, 10, 50), 40, 2000, 50, 0.0),
    ("gpu", "ta", (9, 31, 10), 90, 500, 100, 0.0),
    ("gpu", "ta", (7, 59, 0), 30, 9999, 9, 0.0),
    ("box", "ta", (10, 20, 0), 60, 300, 100, 0.0),
    ("ext", "tb", (11, 15, 0), 2, 1000, 500, 0.02),
]


def approx(x: float) -> object:
    return pytest.approx(x, rel=1e-9, abs=1e-12)


def usage_row(backend: str, tenant: str, at: tuple[int, int, int], secs: float, p: int, c: int, cost: float,
         n: int) -> UsageRecord:
    return UsageRecord(request_id=f"r{n}", tenant_id=tenant, key_prefix="fg-x", model="m", backend=backend,
                       priority="standard", status="finished", stream=False, prompt_tokens=p, completion_tokens=c,
                       total_tokens=p + c, cost=cost, http_status=200, latency_ms=secs * 1000,
                       created_at=DAY.replace(hour=at[0], minute=at[1], second=at[2]))


@pytest.fixture
def session(tmp_path):
    url = f"sqlite:///{tmp_path}/cost.db"
    upgrade(url)
    engine = make_engine(url)
    with Session(engine) as s:
        s.add_all(usage_row(*h, n=i) for i, h in enumerate(HISTORY))
        s.commit()
        yield s
    engine.dispose()


def test_backend_costs_idle_share_and_tenant_shares(session) -> None:
    r = cost_report(session, None, START, END, "hour", PRICES, WEIGHTS, NOW)
    b = {x["backend"]: x for x in r.backend_rows()}
    gpu = b["gpu"]
    assert gpu["pricing"] == "hourly" and gpu["hours"] == approx(4) and gpu["cost"] == approx(14.0)
    assert gpu["busy_hours"] == approx(4 / 60) and gpu["idle_hours"] == approx(236 / 60)
    assert gpu["idle_share"] == approx(236 / 240)
    assert (gpu["prompt_tokens"], gpu["completion_tokens"], gpu["total_tokens"], gpu["requests"]) == (3500, 350, 3850, 3)
    assert gpu["cost_per_million_generated_tokens"] == approx(40_000)
    assert gpu["cost_per_million_tokens"] == approx(14 / 3850 * 1e6)
    assert gpu["weights"] == {"source": "measured", "steps": 100, "unit": "seconds",
                              "prefill_per_token": 0.0005, "decode_per_step": 0.02}
    shares = {t["tenant_id"]: t for t in gpu["tenants"]}
    assert shares["ta"]["engine_seconds"] == approx(6.75) and shares["tb"]["engine_seconds"] == approx(2.0)
    assert shares["ta"]["cost"] == approx(10.8) and shares["tb"]["cost"] == approx(3.2)
    assert shares["ta"]["share"] == approx(6.75 / 8.75)

    box = b["box"]
    assert box["cost"] == approx(8.0) and box["weights"]["source"] == "default"
    assert box["idle_share"] == approx(239 / 240)
    assert box["cost_per_million_tokens"] == approx(20_000) and box["cost_per_million_generated_tokens"] == approx(80_000)
    assert [(t["tenant_id"], t["cost"]) for t in box["tenants"]] == [("ta", approx(8.0))]

    ext = b["ext"]
    assert ext["pricing"] == "list" and ext["cost"] == approx(0.02) and ext["idle_share"] is None
    assert ext["cost_per_million_tokens"] == approx(0.02 / 1500 * 1e6)

    spare = b["spare"]
    assert spare["hours"] == approx(2) and spare["cost"] == approx(2.0) and spare["idle_share"] == approx(1.0)
    assert spare["cost_per_million_tokens"] is None and spare["tenants"] == []


def test_rows_and_groups_carry_the_allocated_cost(session) -> None:
    r = cost_report(session, None, START, END, "hour", PRICES, WEIGHTS, NOW)
    got = [(x["tenant_id"], x["group"], x["total_tokens"], x["cost"], x["cost_per_million_tokens"]) for x in r.rows]
    assert got == [
        ("ta", "2026-11-30T08:00:00", 1200, approx(7.2), approx(6000)),
        ("ta", "2026-11-30T09:00:00", 600, approx(3.6), approx(6000)),
        ("ta", "2026-11-30T10:00:00", 400, approx(8.0), approx(20_000)),
        ("tb", "2026-11-30T08:00:00", 2050, approx(3.2), approx(3.2 / 2050 * 1e6)),
        ("tb", "2026-11-30T11:00:00", 1500, approx(0.02), approx(0.02 / 1500 * 1e6)),
    ]
    groups = [(g["group"], g["requests"], g["cost"], g["cost_per_million_tokens"]) for g in r.groups]
    assert groups == [("2026-11-30T08:00:00", 2, approx(10.4), approx(3200)),
                      ("2026-11-30T09:00:00", 1, approx(3.6), approx(6000)),
                      ("2026-11-30T10:00:00", 1, approx(8.0), approx(20_000)),
                      ("2026-11-30T11:00:00", 1, approx(0.02), approx(0.02 / 1500 * 1e6))]
    # every dollar paid is in a row, except the idle pool nobody used
    assert sum(x["cost"] for x in r.rows) == approx(sum(b.cost for b in r.backends.values()) - 2.0)


def test_one_tenant_pays_its_share_of_the_shared_backend(session) -> None:
    r = cost_report(session, "tb", START, END, "backend", PRICES, WEIGHTS, NOW)
    assert [(x["group"], x["cost"]) for x in r.rows] == [("ext", approx(0.02)), ("gpu", approx(3.2))]
    assert r.backends["gpu"].cost == approx(14.0)  # the backend's cost is still the whole machine's


def test_paid_hours_follow_registration_and_now(session) -> None:
    open_start = cost_report(session, None, None, END, "backend", PRICES, WEIGHTS, NOW)
    gpu = open_start.backends["gpu"]
    assert gpu.hours == approx(12) and gpu.cost == approx(42.0)  # from its registration at 00:00
    assert gpu.prompt_tokens == 3500 + 9999  # and the 07:59 request counts now
    early = cost_report(session, None, START, END, "backend", PRICES, WEIGHTS, now=DAY.replace(hour=11))
    assert early.backends["gpu"].hours == approx(3) and early.backends["spare"].hours == approx(1)


def test_default_weights_when_nothing_was_measured(session) -> None:
    r = cost_report(session, None, START, END, "backend", PRICES, {}, NOW)
    gpu = r.backends["gpu"]
    assert gpu.weights is not None and gpu.weights.source == "default"
    shares = {t.tenant_id: t.cost for t in gpu.tenants.values()}
    assert shares["ta"] == approx(14 * 1800 / 3850) and shares["tb"] == approx(14 * 2050 / 3850)
    partial = cost_report(session, None, START, END, "backend", PRICES,
                          {"gpu": StepCosts(None, 0.02, 5, "direct")}, NOW).backends["gpu"]
    assert partial.weights is not None and partial.weights.source == "partial"
    assert partial.tenants["ta"].cost == approx(14 * 1800 / 3850)  # one figure for both kinds


def test_busy_minutes_edges() -> None:
    m = DAY.replace(hour=8)
    assert busy_minutes([], m, m + timedelta(hours=1)) == 0
    assert busy_minutes([(m + timedelta(seconds=59), m + timedelta(seconds=61))], m, m + timedelta(hours=1)) == 2
    assert busy_minutes([(m - timedelta(minutes=5), m)], m, m + timedelta(hours=1)) == 0  # ended as it opened
    assert busy_minutes([(m, m)], m, m + timedelta(hours=1)) == 1  # no length: its minute
    # the window opens mid-minute: that minute counts for the part inside
    assert busy_minutes([(m, m + timedelta(seconds=50))], m + timedelta(seconds=30), m + timedelta(hours=1)) == approx(0.5)


def test_cached_prompt_tokens_cost_no_prefill() -> None:
    from fairgate.gateway.billing.cost import Cell, backend_costs

    # two tenants, the same tokens; half of tb's prompt came from the prefix cache
    cells = [Cell("ta", "g", "gpu", 1, 1000, 10, 0.0), Cell("tb", "g", "gpu", 1, 1000, 10, 0.0, cached_tokens=500)]
    costs = backend_costs(cells, {"gpu": []}, {"gpu": HourlyPrice(3.0, DAY)},
                          {"gpu": StepCosts(0.001, 0.05, 10, "regression")}, START, START + timedelta(hours=1))
    gpu = costs["gpu"]
    # ta: 1000 x 0.001 + 10 x 0.05 = 1.5 s; tb: 500 x 0.001 + 0.5 = 1.0 s; $3 shared 3:2
    assert gpu.tenants["ta"].engine_seconds == approx(1.5) and gpu.tenants["tb"].engine_seconds == approx(1.0)
    assert gpu.tenants["ta"].cost == approx(1.8) and gpu.tenants["tb"].cost == approx(1.2)
