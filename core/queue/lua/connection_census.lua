-- The web processes' open connections by source address, for a cap across the fleet: each
-- process reports its sources with many connections (`reported`: source, count, ...), a report
-- lives `seconds`, and the answer is the other processes' reports summed by source
-- ({source, count, ...}). Reports are `process|source` fields of `counts`, their deadlines in
-- `due`: a process that stops, or a source that goes quiet, is forgotten in `seconds`.
--- keys: due counts
--- args: process seconds:n *reported
local t = redis.call('TIME')
local now = t[1] + t[2] / 1e6
local stale = redis.call('ZRANGEBYSCORE', due, '-inf', now)
for i = 1, #stale, 1000 do  -- unpack() takes a few thousand values at most
  redis.call('HDEL', counts, unpack(stale, i, math.min(i + 999, #stale)))
end
redis.call('ZREMRANGEBYSCORE', due, '-inf', now)
for i = 1, #reported, 2 do
  local field = process .. '|' .. reported[i]
  redis.call('HSET', counts, field, reported[i + 1])
  redis.call('ZADD', due, now + seconds, field)
end
local lifetime = math.ceil(seconds) + 1
redis.call('EXPIRE', due, lifetime)
redis.call('EXPIRE', counts, lifetime)
local mine = process .. '|'
local others = {}
local all = redis.call('HGETALL', counts)
for i = 1, #all, 2 do
  local field = all[i]
  if string.sub(field, 1, #mine) ~= mine then
    local source = string.match(field, '^[^|]*|(.*)$')
    others[source] = (others[source] or 0) + tonumber(all[i + 1])
  end
end
local out = {}
for source, count in pairs(others) do
  out[#out + 1] = source
  out[#out + 1] = count
end
return out
