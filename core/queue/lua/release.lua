-- The owner gives a running job back to the queue (shutdown past its grace, transient error):
-- a fresh stream entry at the back of the queue (a document keeps its parts and resumes after
-- them). The attempt is not counted against the
-- delivery limit unless `count` is '1' (a retried engine error counts).
-- KEYS: jobs, job, ev_job, ev_client, stats
-- ARGV: token, now, maxlen_job, maxlen_client, ttl, count, reason
-- Returns {'ok', event_id} | {'stale', state}
local jobs, job, ev_job, ev_client, stats = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local values, state = fenced(job, ARGV[1], 'entry', 'id', 'client')
if not values then return stale(stats, state) end
redis.call('XACK', jobs, 'workers', values[3])
redis.call('XDEL', jobs, values[3])
local entry = redis.call('XADD', jobs, '*', 'id', values[4], 'client', values[5])
if ARGV[6] ~= '1' then redis.call('HINCRBY', job, 'attempts', -1) end
redis.call('HSET', job, 'state', 'queued', 'entry', entry, 'owner', '', 'error', ARGV[7])
-- A document keeps its stored parts and counts: its next start resumes after them (start.lua).
-- Any other job starts afresh there; until then its snapshot no longer claims segments.
if redis.call('HGET', job, 'document') ~= '1' then redis.call('HSET', job, 'segments_done', 0) end
redis.call('HDEL', job, 'token')
redis.call('HINCRBY', stats, 'released', 1)
return {'ok', (emit(job, ev_job, ev_client, 'queued', ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])))}
