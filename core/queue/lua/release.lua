-- The owner gives a running job back to the queue (shutdown past its grace, transient error, a
-- document's slice ended while others wait): a job of the fair waiting room goes back to the
-- front of its client's list there, charged for what it ran past its charge; any other gets a
-- fresh stream entry at the back of its stream. A document keeps its parts and resumes after
-- them. The attempt is not counted against the delivery limit unless `count` is '1' (a retried
-- engine error counts: its next run is a suspect one, run alone; a run given back uncounted
-- ended cleanly, and clears that). A job whose client asked to cancel it meanwhile ends as
-- cancelled instead.
--- keys: jobs job ev_job ev_client stats
--- args: token now maxlen_job maxlen_client ttl:n count reason
-- reason: '' for a slice's end
-- Returns {'ok', event_id} | {'stale', state}  ('ok' too when it ended as cancelled)
local values, state = fenced(job, token, 'entry', 'id', 'client', 'lane', 'who')
if not values then return stale(stats, state) end
local lane, who = values[6], values[7]
local base = base_of(job)
if redis.call('HGET', job, 'cancel_requested') == '1' then
  redis.call('HSET', job, 'state', 'cancelled', 'finished_at', now, 'owner', '',
    'error', 'cancelled by the client')
  redis.call('HDEL', job, 'token')
  redis.call('HINCRBY', stats, 'cancelled', 1)
  retire(jobs, job, K.active(base, values[5]), values[3], ttl)
  return {'ok', (emit(job, ev_job, ev_client, 'cancelled', now, maxlen_job, maxlen_client, ttl))}
end
redis.call('XACK', jobs, 'workers', values[3])
redis.call('XDEL', jobs, values[3])
redis.call('HSET', job, 'suspect', count == '1' and '1' or '0')
if count ~= '1' then redis.call('HINCRBY', job, 'attempts', -1) end
redis.call('HSET', job, 'state', 'queued', 'owner', '', 'error', reason, 'queued_at', now)
-- A document keeps its stored parts and counts: its next start resumes after them (start.lua).
-- Any other job starts afresh there; until then its snapshot no longer claims segments.
if redis.call('HGET', job, 'document') ~= '1' then redis.call('HSET', job, 'segments_done', 0) end
redis.call('HDEL', job, 'token')
redis.call('HINCRBY', stats, 'released', 1)
local index = nil  -- its place in its client's waiting list, when it waits there
if lane and lane ~= '' then
  redis.call('HSET', job, 'entry', '')
  local f = redis.call('HMGET', job, 'audio_s', 'taken_audio_s', 'charged', 'weight')
  local over = tonumber(f[1] or '0') - tonumber(f[2] or '0') - tonumber(f[3] or '0')
  if over > 0 then
    local zlane, gone = K.lane(base, lane), K.gone(base, lane)
    local due = over / tonumber(f[4] or '1')
    if redis.call('ZSCORE', zlane, who) then
      redis.call('ZINCRBY', zlane, due, who)
    else
      local clock = tonumber(redis.call('HGET', K.fair(base), 'v:' .. lane) or '0')
      local pass = math.max(clock, tonumber(redis.call('ZSCORE', gone, who) or '0'))
      redis.call('ZADD', gone, pass + due, who)
    end
  end
  index = fair_enter(base, lane, who, values[4], true, now)
else
  local entry = redis.call('XADD', jobs, '*', 'id', values[4], 'client', values[5])
  redis.call('HSET', job, 'entry', entry)
  wake(base)
end
local extra = {}
if reason == '' then extra.yielded = true end
if lane and lane ~= '' then extra.position = fair_position(base, lane, who, values[4], index) end
return {'ok', (emit(job, ev_job, ev_client, 'queued', now, maxlen_job, maxlen_client, ttl, extra))}
