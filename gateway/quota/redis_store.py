"""Redis quota store: one Lua call admits (checks every scope, then reserves in all of them),
one Lua call settles. Exact across any number of gateway replicas sharing the Redis.

Keys carry a hash tag, the request's tenant scope: `<prefix>:{t:<tenant>}:q:<scope>:...` and
`<prefix>:{t:<tenant>}:r:<reservation>`, so one tenant's counters, its keys' counters and its
reservations share one Redis Cluster slot and each script touches one slot (KEYS[1] is that
base; the script builds its keys from it). The config version `<prefix>:ver` is global: on a
single Redis the reserve script reads it as KEYS[2], inside the atomic step; on a Cluster
(`redis_cluster`) it lives in another slot, so the store reads it just before the script and
refuses a stale caller then — a reserve racing an admin change by less than that round trip is
admitted as of the read, as if it had arrived a moment earlier.
Windows use Redis' own clock (TIME), so replicas with skewed clocks still agree.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from fairgate.gateway.config.bus import RedisConfigBus
from fairgate.gateway.quota import (
    BudgetSource,
    QuotaDenied,
    RateLimitState,
    ScopeLimits,
    StaleConfig,
    clamp_amount,
    cost_units,
    has_budget,
    period_tags,
    rate_limit_state,
    retry_after_for,
    scope_kind,
)
from fairgate.gateway.quota.heartbeat import ReservationHeartbeat
from fairgate.gateway.quota.rebuild import SEED, seed_args
from fairgate.gateway.quota.resp import RespClient, Script

# KEYS: the tenant's base `<prefix>:{tag}`, optionally the version key (single Redis).
# ARGV: "1" when the tenant's budgets must have been rebuilt (gateway.quota.rebuild) else "-", rid, version, ttl_ms, day, month, tokens, cost, nscopes, then 7 per scope:
# scope id, rpm, tpm, concurrent, daily, monthly, monthly cost (-1 = unlimited).
# Returns {0, W...} admitted, {1, limit, scope, wait_ms, W...} denied, {2, version} stale
# config, {3, argument} a number outside [-1, 2^53) (the caller validates first; this is the
# backstop), {4} the budgets are not rebuilt yet (nothing written). W: per scope, requests in the window, ms until the request window is empty, tokens
# in the window, ms until the token window is empty (after the admission; as they were, if denied).
# Every argument is checked and every limit is evaluated before the first write, so a refusal
# (or a bad argument) leaves Redis as it was: scripts are not rolled back on error.
RESERVE = """
local p, rid, ver = KEYS[1], ARGV[2], ARGV[3]
local n = tonumber(ARGV[9])
if not n or n < 0 or n > 64 then return {3, 'nscopes'} end
for i = 4, 9 + n * 7 do
  if i ~= 5 and i ~= 6 and (i < 10 or (i - 10) % 7 ~= 0) then
    local x = tonumber(ARGV[i])
    if not x or x ~= math.floor(x) or x < -1 or x >= 9007199254740992 then return {3, tostring(i)} end
  end
end
local ttl, day, month = tonumber(ARGV[4]), ARGV[5], ARGV[6]
local tokens, cost = tonumber(ARGV[7]), tonumber(ARGV[8])
if KEYS[2] then
  local cur = redis.call('GET', KEYS[2]) or '0'
  if cur ~= ver then return {2, cur} end
end
if ARGV[1] == '1' and redis.call('EXISTS', p .. ':seeded:' .. month) == 0 then return {4} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local wstart = now - 60000
local function oldest_wait(key, from)
  local o = redis.call('ZRANGEBYSCORE', key, from, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if o[2] then return tonumber(o[2]) + 60000 - now end
  return 60000
end
local function expired_tokens(s)
  local sum, off = 0, 0
  while true do
    local old = redis.call('ZRANGEBYSCORE', s .. ':tpm', '-inf', wstart, 'LIMIT', off, 1000)
    if #old == 0 then return sum end
    for _, v in ipairs(redis.call('HMGET', s .. ':tpmv', unpack(old))) do sum = sum + (tonumber(v) or 0) end
    off = off + #old
  end
end
local function num(key) return tonumber(redis.call('GET', key) or '0') end
local function empties_in(key)
  local o = redis.call('ZREVRANGEBYSCORE', key, '+inf', '(' .. wstart, 'WITHSCORES', 'LIMIT', 0, 1)
  if o[2] then return tonumber(o[2]) + 60000 - now end
  return 0
end
local function windows(cleaned)
  local w = {}
  for i = 0, n - 1 do
    local b = 10 + i * 7
    local s = p .. ':q:' .. ARGV[b]
    local used_r, reset_r, used_t, reset_t = 0, 0, 0, 0
    if tonumber(ARGV[b+1]) >= 0 then
      used_r, reset_r = redis.call('ZCOUNT', s .. ':rpm', '(' .. wstart, '+inf'), empties_in(s .. ':rpm')
    end
    if tonumber(ARGV[b+2]) >= 0 then
      used_t, reset_t = num(s .. ':tpms'), empties_in(s .. ':tpm')
      if not cleaned then used_t = used_t - expired_tokens(s) end
    end
    local k = #w
    w[k + 1] = used_r
    w[k + 2] = reset_r
    w[k + 3] = used_t
    w[k + 4] = reset_t
  end
  return w
end
local function denied(limit, scope, wait)
  local out = {1, limit, scope, wait}
  for _, v in ipairs(windows(false)) do out[#out + 1] = v end
  return out
end
for i = 0, n - 1 do
  local b = 10 + i * 7
  local s = p .. ':q:' .. ARGV[b]
  local rpm, tpm, conc = tonumber(ARGV[b+1]), tonumber(ARGV[b+2]), tonumber(ARGV[b+3])
  local daily, monthly, cbud = tonumber(ARGV[b+4]), tonumber(ARGV[b+5]), tonumber(ARGV[b+6])
  if rpm >= 0 and redis.call('ZCOUNT', s .. ':rpm', '(' .. wstart, '+inf') >= rpm then
    return denied('requests_per_minute', ARGV[b], oldest_wait(s .. ':rpm', '(' .. wstart))
  end
  if tpm >= 0 and num(s .. ':tpms') - expired_tokens(s) + tokens > tpm then
    return denied('tokens_per_minute', ARGV[b], oldest_wait(s .. ':tpm', '(' .. wstart))
  end
  if conc >= 0 and redis.call('ZCOUNT', s .. ':conc', '(' .. now, '+inf') >= conc then
    return denied('max_concurrent', ARGV[b], 1000)
  end
  if daily >= 0 and num(s .. ':d:' .. day) + tokens > daily then return denied('daily_tokens', ARGV[b], 0) end
  if monthly >= 0 and num(s .. ':m:' .. month) + tokens > monthly then
    return denied('monthly_tokens', ARGV[b], 0)
  end
  if cbud >= 0 and num(s .. ':c:' .. month) + cost > cbud then return denied('monthly_cost', ARGV[b], 0) end
end
-- admitted: from here on only writes, none of which can fail on the validated arguments
local scopes = {}
for i = 0, n - 1 do
  local b = 10 + i * 7
  local s = p .. ':q:' .. ARGV[b]
  scopes[#scopes + 1] = ARGV[b]
  if tonumber(ARGV[b+1]) >= 0 then
    redis.call('ZREMRANGEBYSCORE', s .. ':rpm', '-inf', wstart)
    redis.call('ZADD', s .. ':rpm', now, rid)
    redis.call('PEXPIRE', s .. ':rpm', 120000)
  end
  if tonumber(ARGV[b+2]) >= 0 then
    redis.call('DECRBY', s .. ':tpms', string.format('%d', expired_tokens(s)))
    while true do
      local old = redis.call('ZRANGEBYSCORE', s .. ':tpm', '-inf', wstart, 'LIMIT', 0, 1000)
      if #old == 0 then break end
      redis.call('HDEL', s .. ':tpmv', unpack(old))
      redis.call('ZREM', s .. ':tpm', unpack(old))
    end
    redis.call('ZADD', s .. ':tpm', now, rid)
    redis.call('HSET', s .. ':tpmv', rid, ARGV[7])
    redis.call('INCRBY', s .. ':tpms', ARGV[7])
    for _, k in ipairs({':tpm', ':tpmv', ':tpms'}) do redis.call('PEXPIRE', s .. k, 120000) end
  end
  if tonumber(ARGV[b+3]) >= 0 then
    redis.call('ZREMRANGEBYSCORE', s .. ':conc', '-inf', now)
    redis.call('ZADD', s .. ':conc', now + ttl, rid)
    redis.call('PEXPIRE', s .. ':conc', ttl + 60000)
  end
  redis.call('INCRBY', s .. ':d:' .. day, ARGV[7])
  redis.call('EXPIRE', s .. ':d:' .. day, 172800)
  redis.call('INCRBY', s .. ':m:' .. month, ARGV[7])
  redis.call('EXPIRE', s .. ':m:' .. month, 3024000)
  if cost ~= 0 then
    redis.call('INCRBY', s .. ':c:' .. month, ARGV[8])
    redis.call('EXPIRE', s .. ':c:' .. month, 3024000)
  end
end
local r = p .. ':r:' .. rid
redis.call('HSET', r, 's', table.concat(scopes, ','), 'tok', ARGV[7], 'cost', ARGV[8], 'day', day, 'month', month)
redis.call('PEXPIRE', r, ttl)
local out = {0}
for _, v in ipairs(windows(true)) do out[#out + 1] = v end
out[#out + 1] = now  -- when it was reserved, by Redis' clock: settle compares it with a rebuild's
return out
"""

# KEYS: the tenant's base. ARGV: unused, rid, tokens used, cost used, then what the reserving replica kept: reserved at
# (Redis ms, 0 unknown), day, month, scope ids. Returns 1 settled, 0 already settled or expired, 2 the reservation was
# lost with Redis before a rebuild of the budgets (gateway/quota/rebuild.py): what it used is charged, -1 a bad number
# (nothing written).
SETTLE = """
local p, rid = KEYS[1], ARGV[2]
for i = 3, 4 do
  local x = tonumber(ARGV[i])
  if not x or x ~= math.floor(x) or x < 0 or x >= 9007199254740992 then return -1 end
end
local r = p .. ':r:' .. rid
local v = redis.call('HMGET', r, 's', 'tok', 'cost', 'day', 'month')
if not v[1] then
  -- gone: expired (its reserved amount stays counted) or lost with Redis before a rebuild from the
  -- usage rows, which could not see this request: then what it used is charged now
  local rebuilt = tonumber(redis.call('GET', p .. ':seeded:' .. ARGV[7]) or '0')
  local at = tonumber(ARGV[5]) or 0
  if at <= 0 or rebuilt <= at then return 0 end
  for i = 8, #ARGV do
    local s = p .. ':q:' .. ARGV[i]
    redis.call('INCRBY', s .. ':d:' .. ARGV[6], ARGV[3])
    redis.call('EXPIRE', s .. ':d:' .. ARGV[6], 172800)
    redis.call('INCRBY', s .. ':m:' .. ARGV[7], ARGV[3])
    redis.call('INCRBY', s .. ':c:' .. ARGV[7], ARGV[4])
    for _, k in ipairs({':m:', ':c:'}) do redis.call('EXPIRE', s .. k .. ARGV[7], 3024000) end
  end
  return 2
end
redis.call('DEL', r)
local dt = string.format('%d', tonumber(ARGV[3]) - tonumber(v[2]))
local dc = string.format('%d', tonumber(ARGV[4]) - tonumber(v[3]))
for scope in string.gmatch(v[1], '[^,]+') do
  local s = p .. ':q:' .. scope
  redis.call('ZREM', s .. ':conc', rid)
  if dt ~= '0' then
    redis.call('INCRBY', s .. ':d:' .. v[4], dt)
    redis.call('INCRBY', s .. ':m:' .. v[5], dt)
    if redis.call('HEXISTS', s .. ':tpmv', rid) == 1 then
      redis.call('HINCRBY', s .. ':tpmv', rid, dt)
      redis.call('INCRBY', s .. ':tpms', dt)
    end
  end
  if dc ~= '0' then redis.call('INCRBY', s .. ':c:' .. v[5], dc) end
end
return 1
"""

# KEYS: the tenant's base. ARGV: unused, ttl_ms, then reservation ids. Pushes each live reservation's expiry (its hash
# and its concurrency slots) to now + ttl. Returns how many were still there.
RENEW = """
local p, ttl = KEYS[1], tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local alive = 0
for i = 3, #ARGV do
  local rid = ARGV[i]
  local r = p .. ':r:' .. rid
  local scopes = redis.call('HGET', r, 's')
  if scopes then
    alive = alive + 1
    redis.call('PEXPIRE', r, ttl)
    for scope in string.gmatch(scopes, '[^,]+') do
      local key = p .. ':q:' .. scope .. ':conc'
      if redis.call('ZADD', key, 'XX', 'CH', now + ttl, rid) == 1 then redis.call('PEXPIRE', key, ttl + 60000) end
    end
  end
end
return alive
"""


def hash_tag(scopes: list[ScopeLimits]) -> str:
    """The slot a request's keys share: its tenant scope (`t:<id>`), else its first scope."""
    for limits in scopes:
        if limits.scope.startswith("t:"):
            return limits.scope
    return scopes[0].scope if scopes else "-"


@dataclass(slots=True, frozen=True)
class _Held:
    """A reservation this replica holds: its slot's hash tag, and what settle needs should Redis
    have lost it before a rebuild (reserved at, Redis ms; its day, month and scope ids)."""

    tag: str
    at_ms: int
    day: str
    month: str
    scopes: list[str]


class RedisQuotaStore:
    """Reservations live `reservation_ttl_s` unless renewed: this replica's heartbeat renews
    the ones it holds, so a replica that dies (SIGKILL) gives its slots back within a TTL.
    `cluster`: the URL names one node of a Redis Cluster (redis-py's cluster client routes).
    `budgets`: where a tenant's budgets are rebuilt from when Redis lost them (gateway.quota.rebuild);
    None: not rebuilt."""

    def __init__(self, url: str, prefix: str = "fairgate", reservation_ttl_s: int = 30,
                 cluster: bool = False, budgets: BudgetSource | None = None) -> None:
        if cluster:
            from fairgate.gateway.quota.cluster import ClusterClient

            self._redis: RespClient | ClusterClient = ClusterClient(url)
        else:
            self._redis = RespClient(url)
        self._cluster = cluster
        self._prefix = prefix
        self._ver_key = f"{prefix}:ver"
        self._ttl_ms = reservation_ttl_s * 1000
        self._reserve = Script(self._redis, RESERVE)
        self._settle = Script(self._redis, SETTLE)
        self._renew_script = Script(self._redis, RENEW)
        self._seed = Script(self._redis, SEED)
        self._budgets = budgets
        self._tags: dict[str, _Held] = {}  # live reservation id → its slot and what settle needs
        self.heartbeat = ReservationHeartbeat(self._renew, reservation_ttl_s)

    def base(self, tag: str) -> str:
        """`<prefix>:{<tag>}`: the key prefix of one tenant's slot."""
        return f"{self._prefix}:{{{tag}}}"

    async def reserve(self, reservation_id: str, scopes: list[ScopeLimits], tokens: int,
                      cost: float, version: int) -> RateLimitState:
        day, month = period_tags()
        tag = hash_tag(scopes)
        rebuilt = self._budgets is not None and tag.startswith("t:") and has_budget(scopes)
        args: list[object] = ["1" if rebuilt else "-", reservation_id, version, self._ttl_ms, day, month,
                              clamp_amount(tokens), cost_units(cost), len(scopes)]
        for limits in scopes:
            args.append(limits.scope)
            args.extend(limits.as_ints())
        if self._cluster:  # the version key is in another slot: checked just before (module docstring)
            if int(await self._redis.execute("GET", self._ver_key) or 0) != version:
                raise StaleConfig()
            keys = [self.base(tag)]
        else:
            keys = [self.base(tag), self._ver_key]
        result = await self._reserve(keys, args)
        if result[0] == 4 and self._budgets is not None:  # Redis lost this tenant's budgets: rebuild, retry
            use = await self._budgets(tag[2:])
            await self._seed([self.base(tag)], seed_args(use, day, month))
            result = await self._reserve(keys, args)
        if result[0] == 0:
            self._tags[reservation_id] = _Held(tag, int(result[-1]), day, month, [lim.scope for lim in scopes])
            self.heartbeat.add(reservation_id)
            return rate_limit_state(scopes, result[1:-1])
        if result[0] == 2:
            raise StaleConfig()
        if result[0] == 3:
            raise ValueError(f"quota reserve: argument {result[1]} out of range")
        if result[0] == 4:  # the marker vanished again at once (evicted?): fail closed
            raise RuntimeError("quota reserve: the tenant's budgets could not be rebuilt")
        limit, scope, wait_ms = result[1], result[2], int(result[3])
        raise QuotaDenied(limit, scope_kind(scope), retry_after_for(limit, wait_ms),
                          rate_limit_state(scopes, result[4:]))

    async def settle(self, reservation_id: str, tokens: int, cost: float) -> bool:
        self.heartbeat.discard(reservation_id)
        held = self._tags.pop(reservation_id, None)
        if held is None:  # not reserved here, or settled already
            return False
        done = await self._settle([self.base(held.tag)], ["-", reservation_id, clamp_amount(tokens), cost_units(cost),
                                                          held.at_ms, held.day, held.month, *held.scopes])
        if done == -1:
            raise ValueError("quota settle: amount out of range")
        return bool(done)

    async def _renew(self, reservation_ids: list[str]) -> None:
        by_tag: dict[str, list[str]] = {}
        for rid in reservation_ids:
            held = self._tags.get(rid)
            if held is not None:
                by_tag.setdefault(held.tag, []).append(rid)
        for tag, ids in by_tag.items():  # one call per slot
            await self._renew_script([self.base(tag)], ["-", self._ttl_ms, *ids])

    def config_bus(self) -> RedisConfigBus:
        """The config version on this store's connection (the reserve script checks it)."""
        return RedisConfigBus(self._redis, self._prefix)

    async def counters(self, scope: str, tag: str | None = None) -> dict[str, int]:
        """`tag`: the tenant scope the scope was reserved with (default: the scope itself)."""
        s = f"{self.base(tag or scope)}:q:{scope}"
        day, month = period_tags()
        now = int(time.time() * 1000)
        ex = self._redis.execute
        rpm = await ex("ZCOUNT", f"{s}:rpm", f"({now - 60000}", "+inf")
        conc = await ex("ZCOUNT", f"{s}:conc", f"({now}", "+inf")
        tpms, d, m, c = await ex("MGET", f"{s}:tpms", f"{s}:d:{day}", f"{s}:m:{month}", f"{s}:c:{month}")
        return {"requests": int(rpm), "tokens": int(tpms or 0), "concurrent": int(conc),
                "daily_tokens": int(d or 0), "monthly_tokens": int(m or 0), "monthly_cost": int(c or 0)}

    async def aclose(self) -> None:
        await self.heartbeat.aclose()
        await self._redis.aclose()
