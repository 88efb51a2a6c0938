-- A worker takes a delivered (or reclaimed) stream entry. The start number is the fencing token:
-- every start has its own, even one after a release that gave its attempt back.
-- A document job (one of many segments, kept as parts) resumes after its last stored segment: its
-- parts, cues and counts stay. Any other job starts afresh.
--- keys: jobs job ev_job ev_client stats dlq active segments chunks cues
--- args: id entry worker now max_deliveries:n maxlen_job maxlen_client ttl:n
-- Returns {'ok', token, request_json, client, document, segments_done, samples_done, attempt,
--       queued_at (when it last joined the queue: submitted or given back), lane ('' | 'i' | 'b'),
--       suspect ('1': its last run never ended cleanly, reclaimed or failed: it runs alone)}
--       | {'skip', state} | {'dead', attempts}
local state = redis.call('HGET', job, 'state')
if not state then
  redis.call('XACK', jobs, 'workers', entry)
  redis.call('XDEL', jobs, entry)
  return {'skip', 'gone'}
end
if TERMINAL[state] or redis.call('HGET', job, 'entry') ~= entry then
  -- Finished meanwhile (cancelled while queued), or a stale entry of a released job.
  redis.call('XACK', jobs, 'workers', entry)
  redis.call('XDEL', jobs, entry)
  return {'skip', state}
end
local previous_owner = redis.call('HGET', job, 'owner')
if state == 'running' then
  redis.call('HINCRBY', stats, 'reclaimed', 1)
  redis.call('HSET', job, 'suspect', '1')
end
local attempts = redis.call('HINCRBY', job, 'attempts', 1)
if attempts > max_deliveries then
  local reason = 'gave up after ' .. (attempts - 1) .. ' deliveries'
  -- The client sees the reason; the operator's dead-letter entry also names the last worker
  -- (its name carries a host and a pid, nothing to tell a client).
  local detail = reason
  if previous_owner and previous_owner ~= '' then
    detail = reason .. ' (last worker: ' .. previous_owner .. ')'
  end
  redis.call('HINCRBY', job, 'attempts', -1)
  redis.call('HSET', job, 'state', 'dead', 'error', reason, 'finished_at', now, 'owner', '')
  local letter = redis.call('XADD', dlq, 'MAXLEN', '~', 10000, '*', 'id', id, 'reason', detail,
    'ts', now, 'worker', previous_owner or '')
  redis.call('HSET', job, 'dlq_entry', letter)  -- what a requeue takes out (requeue.lua)
  -- The worker that found it past its deliveries is in its record too (it never ran there).
  record_run(job, id, {worker = worker, at = tonumber(now), dead = true}, ttl)
  redis.call('HINCRBY', stats, 'dead', 1)
  retire(jobs, job, active, entry, ttl)
  emit(job, ev_job, ev_client, 'dead', now, maxlen_job, maxlen_client, ttl)
  return {'dead', attempts - 1}
end
local document = redis.call('HGET', job, 'document') == '1'
-- Every start, counted: which run of the job a chunk belongs to (listeners never splice two
-- runs' audio), and the token that fences every other run's worker out.
local starts = redis.call('HINCRBY', job, 'starts', 1)
redis.call('HSET', job, 'state', 'running', 'owner', worker, 'token', starts, 'started_at', now,
  'chunks_done', 0)
if document then
  redis.call('DEL', chunks)
else
  -- A new attempt streams its segments and chunks afresh: index i must be this attempt's.
  redis.call('HSET', job, 'segments_done', 0, 'samples_done', 0, 'audio_s', 0)
  redis.call('DEL', segments, chunks, cues)
end
redis.call('HINCRBY', stats, 'started', 1)
-- Each start, for the operators' record of the job: which worker held it, and when.
record_run(job, id, {start = starts, attempt = attempts, worker = worker, at = tonumber(now),
  reclaimed_from = state == 'running' and previous_owner or nil}, ttl)
local seq = tonumber(redis.call('HGET', job, 'seq') or '0')
if seq > tonumber(redis.call('HGET', stats, 'started_seq') or '0') then
  redis.call('HSET', stats, 'started_seq', seq)
end
emit(job, ev_job, ev_client, 'running', now, maxlen_job, maxlen_client, ttl)
local counts = redis.call('HMGET', job, 'segments_done', 'samples_done')
return {'ok', starts, redis.call('HGET', job, 'request'), redis.call('HGET', job, 'client'),
  document and '1' or '0', counts[1] or '0', counts[2] or '0', attempts,
  redis.call('HGET', job, 'queued_at') or redis.call('HGET', job, 'created_at'),
  redis.call('HGET', job, 'lane') or '', redis.call('HGET', job, 'suspect') or '0'}
