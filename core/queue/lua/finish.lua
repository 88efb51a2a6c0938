-- Terminal failure or cancellation of a running job by its owner, fenced by the attempt token.
--- keys: jobs job ev_job ev_client stats active
--- args: token ending error now maxlen_job maxlen_client ttl:n
-- ending: 'failed' | 'cancelled'
-- Returns {'ok', event_id} | {'stale', state}
local values, state = fenced(job, token, 'entry')
if not values then return stale(stats, state) end
redis.call('HSET', job, 'state', ending, 'error', error, 'finished_at', now, 'owner', '')
redis.call('HINCRBY', stats, ending, 1)
retire(jobs, job, active, values[3], ttl)
return {'ok', (emit(job, ev_job, ev_client, ending, now, maxlen_job, maxlen_client, ttl))}
