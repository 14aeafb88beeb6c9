"""Budgets rebuilt from the usage rows when a store's counters are gone, so a Redis restart (or
flush, or a single process restarting with the memory store) never grants a second budget.

The daily and monthly counters live only in the store; the usage rows (gateway/billing/usage.py,
one per request, in SQL) outlive it. Each tenant's slot carries a marker, `seeded:<month>`, set
when its budgets were last rebuilt; it expires with the monthly counters. A reserve with a budget
in any scope finds the marker missing, reserves nothing and asks the store's `BudgetSource` what
the rows say this tenant and its keys used this UTC day and month; SEED raises each counter to
at least that (never lowers one) and sets the marker, once: a replica racing it finds the marker
and writes nothing. Then the reserve runs again. Tenants without budgets never look.

Requests in flight when the counters were lost are not in the rows yet and their reservations went
with Redis: the marker holds when the rebuild ran (Redis ms), and settling a reservation made before
it, which Redis no longer knows, charges what the request used (redis_store.SETTLE). What is not
rebuilt: rows still queued in a replica's writer (tens of milliseconds).
"""

from __future__ import annotations

from fairgate.gateway.quota import BudgetUse

# KEYS: the tenant's base `<prefix>:{t:<tenant>}`. ARGV: unused, day, month, then 4 per scope:
# scope id, daily tokens, monthly tokens, monthly cost (micro-dollars). Returns 1 seeded, 0 the
# marker was there already (nothing written), -1 a bad number (nothing written).
SEED = """
local p, day, month = KEYS[1], ARGV[2], ARGV[3]
for i = 4, #ARGV do
  if (i - 4) % 4 ~= 0 then
    local x = tonumber(ARGV[i])
    if not x or x ~= math.floor(x) or x < 0 or x >= 9007199254740992 then return -1 end
  end
end
local marker = p .. ':seeded:' .. month
if redis.call('EXISTS', marker) == 1 then return 0 end
for i = 4, #ARGV, 4 do
  local s = p .. ':q:' .. ARGV[i]
  local keys = {s .. ':d:' .. day, s .. ':m:' .. month, s .. ':c:' .. month}
  local ttls = {172800, 3024000, 3024000}
  for j = 1, 3 do
    local want = tonumber(ARGV[i + j])
    if want > tonumber(redis.call('GET', keys[j]) or '0') then
      redis.call('SET', keys[j], string.format('%d', want), 'EX', ttls[j])
    end
  end
end
local t = redis.call('TIME')  -- when: a reservation older than this was not in the rows (settle charges it)
redis.call('SET', marker, string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)), 'EX', 3024000)
return 1
"""


def seed_args(use: dict[str, BudgetUse], day: str, month: str) -> list[object]:
    """SEED's ARGV for what the rows say each scope used."""
    args: list[object] = ["-", day, month]
    for scope, u in sorted(use.items()):
        args += [scope, u.daily_tokens, u.monthly_tokens, u.monthly_cost]
    return args
