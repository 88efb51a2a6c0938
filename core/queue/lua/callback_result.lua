-- The outcome of one delivery attempt, recorded by the sender that holds the claim.
-- 'delivered' and 'failed' (no attempt left, or a target that may never be called) end it;
-- 'retry' makes it due again at `next_ms`. The job's record (while it lasts) shows the state,
-- the attempts and the last failure; the stats hash counts outcomes.
--- keys: due data job stats
--- args: id claim outcome next_ms:n error
-- outcome: 'delivered' | 'retry' | 'failed'
-- Returns 'ok' | 'stale' (another sender holds it now) | 'gone'
local raw = redis.call('HGET', data, id)
if not raw then return 'gone' end
local record = cjson.decode(raw)
if record.claim ~= claim then return 'stale' end
record.claim = nil
if outcome == 'retry' then
  redis.call('HSET', data, id, cjson.encode(record))
  redis.call('ZADD', due, next_ms, id)
else
  redis.call('HDEL', data, id)
  redis.call('ZREM', due, id)
end
if redis.call('EXISTS', job) == 1 then
  redis.call('HSET', job, 'callback', outcome == 'retry' and 'pending' or outcome,
    'callback_attempts', record.attempts, 'callback_error', error)
end
redis.call('HINCRBY', stats, 'callbacks_' .. outcome, 1)
return 'ok'
