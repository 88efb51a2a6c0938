-- A sender takes the callbacks that are due: each is pushed back by `lease` ms (due again only if
-- this sender dies holding it) and marked with the sender's claim, so that a sender whose claim
-- lapsed cannot record the attempt another one has made since. The attempt is counted here, as
-- it starts: one cut short by a crash is counted too.
-- KEYS: due (sorted set), data (hash); the jobs' keys are derived from `data`
-- ARGV: now_ms, lease_ms, max, claim
-- Returns {id, record_json, id, record_json, ...}
local due, data = KEYS[1], KEYS[2]
local now = tonumber(ARGV[1])
local out = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', due, '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))) do
  local raw = redis.call('HGET', data, id)
  if raw then
    local record = cjson.decode(raw)
    record.claim = ARGV[4]
    record.attempts = record.attempts + 1
    raw = cjson.encode(record)
    local job = string.gsub(data, ':callbacks:data$', ':job:' .. id)
    if redis.call('EXISTS', job) == 1 then
      redis.call('HSET', job, 'callback_attempts', record.attempts)
    end
    redis.call('HSET', data, id, raw)
    redis.call('ZADD', due, now + tonumber(ARGV[2]), id)
    out[#out + 1] = id
    out[#out + 1] = raw
  else
    redis.call('ZREM', due, id)
  end
end
return out
