-- An operator requeues a dead job (console.py): a new attempt of its original request, for its
-- own client, with its deliveries counted afresh. It leaves the dead letters, waits where it
-- waited when it was submitted (its client's list in its lane, or the back of its stream) and
-- its client's streams hear a `queued` event. Only a dead job is requeued: a second requeue
-- finds it queued (or running, or ended) and changes nothing, so two make one job.
-- Its runs ended badly (that is how it died), so its next one is a suspect's: it runs alone.
--- keys: job ev_job ev_client stats active dlq audit parts cues
--- args: id now maxlen_job maxlen_client ttl:n by
-- by: the operator, for the audit stream
-- Returns {'ok', event_id} | {'missing'} | {'not_dead', state}
local v = redis.call('HMGET', job, 'state', 'lane', 'who', 'stream', 'client', 'dlq_entry',
  'document', 'segments_done')
if not v[1] then return {'missing'} end
if v[1] ~= 'dead' then return {'not_dead', v[1]} end
local base = base_of(job)
redis.call('PERSIST', job)
redis.call('HSET', job, 'state', 'queued', 'attempts', 0, 'error', '', 'owner', '',
  'suspect', '1', 'queued_at', now, 'requeued_at', now, 'requeued_by', by)
redis.call('HDEL', job, 'finished_at', 'token', 'cancel_requested', 'dlq_entry', 'callback',
  'callback_attempts', 'callback_error')
redis.call('HINCRBY', job, 'requeues', 1)
-- A document resumes after its stored parts, as after any give-back, if they are all still
-- kept (they expire a TTL after their last write, before the job); else it starts afresh.
-- Any other job starts afresh.
if v[7] == '1' and redis.call('LLEN', parts) == tonumber(v[8] or '0') then
  redis.call('PERSIST', parts)
  redis.call('PERSIST', cues)
else
  redis.call('HSET', job, 'segments_done', 0, 'samples_done', 0, 'audio_s', 0)
  if v[7] == '1' then redis.call('DEL', parts, cues) end
end
redis.call('SADD', active, id)
redis.call('EXPIRE', active, ttl)
if v[6] and v[6] ~= '' then redis.call('XDEL', dlq, v[6]) end
local extra = {requeued = true}
if v[2] and v[2] ~= '' then
  redis.call('HSET', job, 'entry', '')
  local index = fair_enter(base, v[2], v[3], id, false, now)
  extra.position = fair_position(base, v[2], v[3], id, index)
else
  local stream = v[4] or K.jobs(base)
  redis.call('HSET', job, 'entry', redis.call('XADD', stream, '*', 'id', id, 'client', v[5]))
  wake(base)
end
redis.call('HINCRBY', stats, 'requeued', 1)
redis.call('XADD', audit, 'MAXLEN', '~', AUDIT_MAXLEN, '*', 'by', by,
  'action', 'dlq.requeue', 'target', id, 'ts', now)
return {'ok', (emit(job, ev_job, ev_client, 'queued', now, maxlen_job, maxlen_client, ttl, extra))}
