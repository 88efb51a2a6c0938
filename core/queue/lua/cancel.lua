-- Cancel on behalf of a client: a queued job is cancelled at once and never starts; a running job
-- is flagged and its owner stops at the next segment or batch boundary.
-- KEYS: jobs, job, ev_job, ev_client, stats, active, usage, usage_expiry (the owner's storage
--       charges: a job that never ran gives its charge back)
-- ARGV: now, maxlen_job, maxlen_client, ttl, client ('' = any), unstarted_ttl (the job and its
-- own events, when it never ran: nothing to keep them for)
-- Returns {'cancelled'} | {'cancelling'} | {'terminal', state} | {'missing'} | {'forbidden'}
-- ('forbidden': the job belongs to another client; only its owner cancels it)
local jobs, job, ev_job, ev_client, stats, active =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local values = redis.call('HMGET', job, 'state', 'entry', 'client', 'cancel_requested')
local state = values[1]
if not state then return {'missing'} end
if ARGV[5] ~= '' and values[3] ~= ARGV[5] then return {'forbidden'} end
if TERMINAL[state] then return {'terminal', state} end
local ttl = tonumber(ARGV[4])
if state == 'queued' then
  redis.call('HSET', job, 'state', 'cancelled', 'finished_at', ARGV[1],
    'error', 'cancelled by the client')
  redis.call('HINCRBY', stats, 'cancelled', 1)
  local unstarted = tonumber(ARGV[6])
  retire(jobs, job, active, values[2], unstarted, true)
  local charged = redis.call('HGET', KEYS[7], redis.call('HGET', job, 'id'))
  if charged then
    redis.call('HINCRBY', KEYS[7], 'total', -tonumber(charged))
    redis.call('HDEL', KEYS[7], redis.call('HGET', job, 'id'))
    redis.call('ZREM', KEYS[8], redis.call('HGET', job, 'id'))
  end
  emit(job, ev_job, ev_client, 'cancelled', ARGV[1], ARGV[2], ARGV[3], ttl)
  redis.call('EXPIRE', ev_job, unstarted)
  return {'cancelled'}
end
if values[4] ~= '1' then
  redis.call('HSET', job, 'cancel_requested', '1')
  emit(job, ev_job, ev_client, 'cancelling', ARGV[1], ARGV[2], ARGV[3], ttl)
end
return {'cancelling'}
