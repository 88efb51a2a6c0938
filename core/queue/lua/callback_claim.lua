-- A sender takes the callbacks that are due: each is pushed back by `lease` ms (due again only if
-- this sender dies holding it) and marked with the sender's claim, so that a sender whose claim
-- lapsed cannot record the attempt another one has made since. The attempt is counted here, as
-- it starts: one cut short by a crash is counted too.
-- One owner's callbacks (an API key's, or an address's whatever its cookies) take at most
-- `per_client` of a sender's deliveries at once: the rest of its due callbacks are deferred by
-- `defer` ms (not an attempt), so that a receiver that never answers holds up its own owner's
-- callbacks, not everyone's. A callback kept past its `until`
-- (a day after its job ended: its retries are long over) is dropped.
--- keys: due data
--- args: now:n lease_ms:n max:n claim per_client:n defer_ms:n *in_flight
-- due: the sorted set, data: the hash (keys.py: callbacks_due, callbacks); the jobs' keys are
-- derived from `data`. in_flight: pairs of (owner, deliveries this sender has in flight for it)
-- Returns {id, record_json, id, record_json, ...}
local base = string.sub(data, 1, #data - #K.callbacks(''))  -- the queue's (keys.py)
local busy = {}
for i = 1, #in_flight, 2 do busy[in_flight[i]] = tonumber(in_flight[i + 1]) end
local out, taken = {}, 0
-- A bounded look ahead: deferred ones leave the window, so the next look sees further.
for _, id in ipairs(redis.call('ZRANGEBYSCORE', due, '-inf', now, 'LIMIT', 0, max * 4)) do
  if taken >= max then break end
  local raw = redis.call('HGET', data, id)
  if raw then
    local record = cjson.decode(raw)
    local client = record.owner or record.client or ''
    if record['until'] and now / 1000 > record['until'] then
      redis.call('HDEL', data, id)
      redis.call('ZREM', due, id)
    elseif (busy[client] or 0) >= per_client then
      redis.call('ZADD', due, now + defer_ms, id)
    else
      busy[client] = (busy[client] or 0) + 1
      record.claim = claim
      record.attempts = record.attempts + 1
      raw = cjson.encode(record)
      local job = K.job(base, id)
      if redis.call('EXISTS', job) == 1 then
        redis.call('HSET', job, 'callback_attempts', record.attempts)
      end
      redis.call('HSET', data, id, raw)
      redis.call('ZADD', due, now + lease_ms, id)
      out[#out + 1] = id
      out[#out + 1] = raw
      taken = taken + 1
    end
  else
    redis.call('ZREM', due, id)
  end
end
return out
