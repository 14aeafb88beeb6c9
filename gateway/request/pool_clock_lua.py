"""The Lua scripts of a pool's fleet-wide virtual clock (gateway/request/pool_clock.py, where the
keys they use are described). Each runs atomically in Redis; every key is under the pool's base,
so in a Redis Cluster they all live in the pool's one slot."""

# Wakes gateways blocked on their `:wake:<gw>` list (one pending wake each is enough).
WAKE = """
local function wake(base, gateways)
  for _, g in ipairs(gateways or {}) do
    local k = base .. ':wake:' .. g
    redis.call('LPUSH', k, 1)
    redis.call('LTRIM', k, 0, 0)
    redis.call('PEXPIRE', k, 5000)
  end
end
"""
# KEYS: base. ARGV: gateway id, slot ttl ms, demand ttl ms, active lead, active window ms, headroom
# slots, headroom window ms, replicas n, then per replica name and
# slots; tenants n, then per tenant: tenant, weight, waiting, k and k triples (slot id, prompt
# cost, preferred replica or ""). Returns granted count, (slot id, replica) per grant, live
# gateways, slots in use, then (tenant, counter) pairs.
ADMIT = WAKE + """
local base = KEYS[1]
local slots, vtc, gws, live = base .. ':slots', base .. ':vtc', base .. ':gws', base .. ':live'
local gw, ttl, dttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local lead, window, recent = tonumber(ARGV[4]), tonumber(ARGV[5]), base .. ':recent'
local reserve, about_ms, owners = tonumber(ARGV[6]), tonumber(ARGV[7]), base .. ':owner'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local gone = redis.call('ZRANGEBYSCORE', slots, '-inf', now)
if #gone > 0 then
  redis.call('HDEL', owners, unpack(gone))
  redis.call('ZREMRANGEBYSCORE', slots, '-inf', now)
end
redis.call('ZREMRANGEBYSCORE', gws, '-inf', now)
redis.call('ZREMRANGEBYSCORE', live, '-inf', now)
redis.call('ZADD', live, now + 10000, gw)
redis.call('PEXPIRE', live, 70000)
local counter = {}
local function c(tenant)
  if counter[tenant] == nil then counter[tenant] = tonumber(redis.call('HGET', vtc, tenant) or '0') end
  return counter[tenant]
end
local before, others = {}, {}  -- others: tenant -> the other gateways where it waits
for _, g in ipairs(redis.call('ZRANGE', gws, 0, -1)) do
  local d = redis.call('HGETALL', base .. ':demand:' .. g)
  for i = 1, #d, 2 do
    before[d[i]] = true
    if g ~= gw then
      others[d[i]] = others[d[i]] or {}
      table.insert(others[d[i]], g)
    end
  end
end
local room, replicas, i, cap = {}, {}, 9, 0
for _ = 1, tonumber(ARGV[8]) do
  room[ARGV[i]] = tonumber(ARGV[i + 1])
  replicas[#replicas + 1] = ARGV[i]
  cap = cap + room[ARGV[i]]
  i = i + 2
end
local held = redis.call('ZRANGE', slots, 0, -1)
local floating = 0
for _, m in ipairs(held) do
  local r = string.match(m, '^(.*)/[^/]*$')
  if room[r] then room[r] = room[r] - 1 elseif r == '*' then floating = floating + 1 end
end
local free = -floating
for _, r in ipairs(replicas) do
  if room[r] > 0 then free = free + room[r] end
end
local mine, names = {}, {}
local ntenants = tonumber(ARGV[i])
i = i + 1
for _ = 1, ntenants do
  local e = {w = tonumber(ARGV[i + 1]), n = tonumber(ARGV[i + 2]), k = tonumber(ARGV[i + 3]), at = 1, first = i + 4}
  mine[ARGV[i]] = e
  names[#names + 1] = ARGV[i]
  i = i + 4 + 3 * e.k
end
local floor = tonumber(redis.call('GET', base .. ':floor') or '0')
local least = nil
for tenant in pairs(before) do
  if least == nil or c(tenant) < least then least = c(tenant) end
end
for _, tenant in ipairs(names) do
  if not before[tenant] then
    local lift = least or floor
    local seen = tonumber(redis.call('HGET', recent, tenant) or '-1')
    if seen >= 0 and now - seen <= window then lift = lift - lead / mine[tenant].w end
    if c(tenant) < lift then
      counter[tenant] = lift
      redis.call('HSET', vtc, tenant, tostring(lift))
    end
  end
end
-- Headroom: the last `reserve` free slots go only to a tenant holding less than its weighted share
-- of the pool among the tenants about (holding, waiting anywhere, or seen within about_ms).
local holds, share = {}, {}
if reserve > 0 then
  if #held > 0 then
    local who = redis.call('HMGET', owners, unpack(held))
    for j = 1, #held do
      if who[j] then holds[who[j]] = (holds[who[j]] or 0) + 1 end
    end
  end
  local about = {}
  for tenant in pairs(holds) do about[tenant] = true end
  for tenant in pairs(before) do about[tenant] = true end
  for _, tenant in ipairs(names) do
    about[tenant] = true
    redis.call('HSET', base .. ':weight', tenant, tostring(mine[tenant].w))
  end
  redis.call('PEXPIRE', base .. ':weight', 86400000)
  local seen = redis.call('HGETALL', recent)
  for j = 1, #seen, 2 do
    if now - tonumber(seen[j + 1]) < about_ms then about[seen[j]] = true end
  end
  local total = 0
  for tenant in pairs(about) do
    share[tenant] = mine[tenant] and mine[tenant].w or tonumber(redis.call('HGET', base .. ':weight', tenant) or '1')
    total = total + share[tenant]
  end
  for tenant in pairs(about) do share[tenant] = cap * share[tenant] / total end
end
local function may(tenant)
  return free > reserve or (holds[tenant] or 0) < share[tenant]
end
local granted = {}
local served = floor  -- the highest counter let through this round, before its charge
while free > 0 do
  local best, bestv = nil, nil
  for tenant in pairs(others) do
    if may(tenant) and (bestv == nil or c(tenant) < bestv) then best, bestv = tenant, c(tenant) end
  end
  for _, tenant in ipairs(names) do
    local e = mine[tenant]
    if e.at <= e.k and may(tenant) and (bestv == nil or c(tenant) <= bestv) then best, bestv = tenant, c(tenant) end
  end
  local e = best and mine[best]
  if not e or e.at > e.k then
    if best then wake(base, others[best]) end  -- its slot: its gateway takes it now
    break
  end
  local at = e.first + 3 * (e.at - 1)
  local r = ARGV[at + 2]
  if not room[r] or room[r] <= 0 then
    r = nil
    for _, x in ipairs(replicas) do
      if room[x] > 0 and (r == nil or room[x] > room[r]) then r = x end
    end
  end
  redis.call('ZADD', slots, now + ttl, r .. '/' .. ARGV[at])
  redis.call('HSET', owners, r .. '/' .. ARGV[at], best)
  holds[best] = (holds[best] or 0) + 1
  room[r] = room[r] - 1
  if bestv > served then served = bestv end
  counter[best] = bestv + tonumber(ARGV[at + 1]) / e.w
  redis.call('HSET', vtc, best, tostring(counter[best]))
  redis.call('HSET', recent, best, now)
  granted[#granted + 1] = ARGV[at]
  granted[#granted + 1] = r
  e.at = e.at + 1
  free = free - 1
end
redis.call('PEXPIRE', slots, ttl + 60000)
redis.call('PEXPIRE', owners, ttl + 60000)
redis.call('PEXPIRE', vtc, 86400000)
if #granted > 0 then redis.call('PEXPIRE', recent, window + 60000) end
local mykey = base .. ':demand:' .. gw
redis.call('DEL', mykey)
local low = nil
for tenant in pairs(others) do
  if low == nil or c(tenant) < low then low = c(tenant) end
end
for _, tenant in ipairs(names) do
  local e = mine[tenant]
  if e.n - (e.at - 1) > 0 then
    redis.call('HSET', mykey, tenant, e.n - (e.at - 1))
    if low == nil or c(tenant) < low then low = c(tenant) end
  end
end
if redis.call('EXISTS', mykey) == 1 then
  redis.call('PEXPIRE', mykey, dttl)
  redis.call('ZADD', gws, now + dttl, gw)
  redis.call('PEXPIRE', gws, dttl + 60000)
else
  redis.call('ZREM', gws, gw)
end
if low ~= nil and low > served then served = low end
if served > floor then
  redis.call('SET', base .. ':floor', tostring(served), 'PX', 86400000)
end
local out = {#granted / 2}
for _, x in ipairs(granted) do out[#out + 1] = x end
out[#out + 1] = redis.call('ZCARD', live)
out[#out + 1] = redis.call('ZCARD', slots)
for tenant, v in pairs(counter) do
  out[#out + 1] = tenant
  out[#out + 1] = tostring(v)
end
return out
"""
# KEYS: base. ARGV: `<replica>/<slot id>`, tenant, charge (completion tokens / weight), gateway id,
# the longer of the active and headroom windows in ms (how long its end counts). Wakes the
# other gateways where the least-served waiting tenant waits (the releaser tries on its own).
RELEASE = WAKE + """
local base = KEYS[1]
local vtc = base .. ':vtc'
local removed = redis.call('ZREM', base .. ':slots', ARGV[1])
redis.call('HDEL', base .. ':owner', ARGV[1])
if ARGV[2] ~= '' then
  local t = redis.call('TIME')
  redis.call('HSET', base .. ':recent', ARGV[2], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  redis.call('PEXPIRE', base .. ':recent', tonumber(ARGV[5]) + 60000)
end
if tonumber(ARGV[3]) > 0 then
  redis.call('HINCRBYFLOAT', vtc, ARGV[2], ARGV[3])
  redis.call('PEXPIRE', vtc, 86400000)
end
if removed == 0 then return 0 end  -- expired already: nothing was freed now
local at, best, bestv = {}, nil, nil
for _, g in ipairs(redis.call('ZRANGE', base .. ':gws', 0, -1)) do
  local d = redis.call('HGETALL', base .. ':demand:' .. g)
  for i = 1, #d, 2 do
    local v = tonumber(redis.call('HGET', vtc, d[i]) or '0')
    if bestv == nil or v < bestv then best, bestv = d[i], v end
    at[d[i]] = at[d[i]] or {}
    if g ~= ARGV[4] then table.insert(at[d[i]], g) end
  end
end
if best then wake(base, at[best]) end
return 1
"""
# KEYS: base. ARGV: ttl_ms, slot ids. Records slots a gateway let through on its own while Redis was
# unreachable, as `*/<slot id>` (on no replica: ADMIT takes them off the pool's total).
ADOPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 2, #ARGV do redis.call('ZADD', KEYS[1] .. ':slots', now + tonumber(ARGV[1]), '*/' .. ARGV[i]) end
redis.call('PEXPIRE', KEYS[1] .. ':slots', tonumber(ARGV[1]) + 60000)
return 1
"""
# KEYS: base. ARGV: ttl_ms, slot ids. Pushes live slots' expiry to now + ttl.
RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 2, #ARGV do redis.call('ZADD', KEYS[1] .. ':slots', 'XX', now + tonumber(ARGV[1]), ARGV[i]) end
return 1
"""
