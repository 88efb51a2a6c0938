-- Terminal failure or cancellation of a running job by its owner, fenced by the attempt token.
-- KEYS: jobs, job, ev_job, ev_client, stats, active
-- ARGV: token, state ('failed' | 'cancelled'), error, now, maxlen_job, maxlen_client, ttl
-- Returns {'ok', event_id} | {'stale', state}
local jobs, job, ev_job, ev_client, stats, active =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local values, state = fenced(job, ARGV[1], 'entry')
if not values then return stale(stats, state) end
local ttl = tonumber(ARGV[7])
redis.call('HSET', job, 'state', ARGV[2], 'error', ARGV[3], 'finished_at', ARGV[4], 'owner', '')
redis.call('HINCRBY', stats, ARGV[2], 1)
retire(jobs, job, active, values[3], ttl)
return {'ok', (emit(job, ev_job, ev_client, ARGV[2], ARGV[4], ARGV[5], ARGV[6], ttl))}
