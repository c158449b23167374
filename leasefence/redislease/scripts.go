package redislease

import "github.com/redis/go-redis/v9"

// The Lua scripts. Each runs as one atomic step in Redis. Fences travel as
// decimal strings and are compared as Lua numbers, exact below 2^53
// (MaxFence); they are written back with %d, never with tostring, which
// would switch to exponent notation.

// luaLease reads a holder key's "<fence>:<holder>" and judges a token
// against the live lease, or else against the resource's latest grant.
const luaLease = `
local function parse(v)
  local i = string.find(v, ':', 1, true)
  return tonumber(string.sub(v, 1, i - 1)), string.sub(v, i + 1)
end

-- judge returns 'current' when (fence, holder) is the live lease in hk,
-- and otherwise the reason it is not, from hk or the latest grant in lk.
local function judge(fence, holder, hk, lk)
  local v = redis.call('GET', hk)
  if v then
    local f, h = parse(v)
    if fence > f then return 'unknown' end
    if fence < f then return 'superseded' end
    if holder ~= h then return 'unknown' end
    return 'current'
  end
  local l = redis.call('HMGET', lk, 'f', 'h', 'released')
  if not l[1] then return 'unknown' end
  local f = tonumber(l[1])
  if fence > f then return 'unknown' end
  if fence < f then return 'superseded' end
  if holder ~= l[2] then return 'unknown' end
  if l[3] == '1' then return 'released' end
  return 'expired'
end

-- delayKey sets the resource's lock-delay key dk to outlive the holder key
-- by the lock-delay (px, the TTL plus the delay, in ms), or deletes it when
-- px is '0': it is set in the script that sets the holder key's TTL, so its
-- end is always the lease's expiry plus the delay.
local function delayKey(dk, px)
  if px == '0' then
    redis.call('DEL', dk)
  else
    redis.call('SET', dk, '1', 'PX', px)
  end
end
`

// acquireScript: KEYS counter, holder, last, request, delay; ARGV holder,
// resource, ttl ms, min fence, replay window ms, max fence, ttl + lock-delay
// ms (0 without a lock-delay). A grant answers with its fence and the
// counter's own next value (below the fence when the min fence moved it).
// A lock-delay answers with the delay key's PTTL.
var acquireScript = redis.NewScript(luaLease + `
local rec = redis.call('HMGET', KEYS[4], 'h', 'r', 'f', 't')
local cur = redis.call('GET', KEYS[2])
if rec[1] then
  if rec[1] ~= ARGV[1] or rec[2] ~= ARGV[2] then return {'request-conflict'} end
  if cur and parse(cur) == tonumber(rec[3]) then
    return {'replay', rec[3], rec[4], redis.call('PTTL', KEYS[2])}
  end
  return {'stale-request'}
end
if cur then
  local _, h = parse(cur)
  return {'held', h, redis.call('PTTL', KEYS[2])}
end
local delay = redis.call('PTTL', KEYS[5])
if delay > 0 then return {'lock-delay', delay} end
local f = redis.call('INCR', KEYS[1])
local drawn = f
local min = tonumber(ARGV[4])
if f <= min then
  f = min + 1
  redis.call('SET', KEYS[1], string.format('%d', f))
end
if f > tonumber(ARGV[6]) then return {'exhausted'} end
local fs = string.format('%d', f)
if not redis.call('SET', KEYS[2], fs .. ':' .. ARGV[1], 'NX', 'PX', ARGV[3]) then
  return redis.error_reply('holder key appeared during the script')
end
redis.call('HSET', KEYS[3], 'f', fs, 'h', ARGV[1], 'released', '0')
redis.call('HSET', KEYS[4], 'h', ARGV[1], 'r', ARGV[2], 'f', fs, 't', ARGV[3])
redis.call('PEXPIRE', KEYS[4], ARGV[5])
delayKey(KEYS[5], ARGV[7])
return {'granted', fs, drawn}
`)

// renewScript: KEYS holder, last, delay; ARGV fence, holder, ttl ms,
// ttl + lock-delay ms (0 without a lock-delay).
var renewScript = redis.NewScript(luaLease + `
local j = judge(tonumber(ARGV[1]), ARGV[2], KEYS[1], KEYS[2])
if j == 'current' then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  delayKey(KEYS[3], ARGV[4])
  return {'ok'}
end
return {j}
`)

// releaseScript: KEYS holder, last, delay; ARGV fence, holder. A release
// deletes the delay key with the holder key: no lock-delay after it.
var releaseScript = redis.NewScript(luaLease + `
local j = judge(tonumber(ARGV[1]), ARGV[2], KEYS[1], KEYS[2])
if j == 'current' then
  redis.call('DEL', KEYS[1], KEYS[3])
  redis.call('HSET', KEYS[2], 'released', '1')
  return {'ok'}
end
return {j}
`)

// luaFloor judges a token against a gate's floor hash: 'raise' (above it,
// or no floor yet), 'equal' (the floor's own token), 'conflict' (the
// floor's fence, another holder) or 'stale' (below it).
const luaFloor = `
local function floor(fk, fence, holder)
  local c = redis.call('HMGET', fk, 'f', 'h')
  if not c[1] then return 'raise', c end
  local f = tonumber(c[1])
  if fence > f then return 'raise', c end
  if fence < f then return 'stale', c end
  if holder == c[2] then return 'equal', c end
  return 'conflict', c
end
`

// admitScript raises the floor to an admitted token and writes nothing
// else. KEYS floor; ARGV fence, holder.
var admitScript = redis.NewScript(luaFloor + `
local v, c = floor(KEYS[1], tonumber(ARGV[1]), ARGV[2])
if v == 'raise' then redis.call('HSET', KEYS[1], 'f', ARGV[1], 'h', ARGV[2]) end
if v == 'raise' or v == 'equal' then return {'admitted'} end
return {v, c[1], c[2]}
`)

// refuseScript appends the refusal of a token to the gate's log, under the
// next sequence number, if the floor still refuses it. KEYS floor, log;
// ARGV fence, holder, entries retained.
var refuseScript = redis.NewScript(luaFloor + `
local v, c = floor(KEYS[1], tonumber(ARGV[1]), ARGV[2])
if v == 'raise' or v == 'equal' then return {'admitted'} end
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
local seq = 1
if last[1] then seq = tonumber(string.match(last[1][1], '^(%d+)')) + 1 end
local id = string.format('%d-0', seq)
redis.call('XADD', KEYS[2], 'MAXLEN', ARGV[3], id,
  'holder', ARGV[2], 'fence', ARGV[1], 'floorHolder', c[2], 'floorFence', c[1])
return {v, seq, c[1], c[2]}
`)
