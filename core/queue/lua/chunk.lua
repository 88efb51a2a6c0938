-- A running job's next chunk of audio: 16-bit PCM at the job's rate, in order across segments,
-- the pause between segments included, so that its chunks join into the final file's samples.
-- The chunk is appended to the job's chunk list and announced by an `audio` event on the job's
-- own event stream only: a client's stream (/v1/events) carries state changes, not audio.
--- keys: job chunks ev_job
--- args: token index:n segment:n pcm duration_s:n now:n maxlen_job linger:n budget:n last
-- index: 1-based, across the job; segment: 1-based; linger: seconds the list lives after its
-- last chunk; budget: the queue's chunk budget (bytes; 0: none); last: '1' for the job's last
-- chunk (its event says so: the audio is all out, though the job may still be checking it)
-- Returns 'ok' | 'cancel' | 'lost' | 'full' (its chunks outgrew their budget: not stored; the
--       worker fails the job)
local values = fenced(job, token, 'cancel_requested', 'chunks_done', 'chunk_charge', 'id',
  'chunk_bytes')
if not values then return 'lost' end
local done = tonumber(values[4] or '0')
if index <= done then return 'ok' end  -- a retry of a chunk already stored
if index ~= done + 1 then return 'lost' end  -- a gap: this attempt's stream is broken
-- Charged at submission by an estimate; past it, the real bytes are charged as they come, and
-- a stream past the budget of its queue, client or address stops here.
local written = tonumber(values[7] or '0') + string.len(pcm)
if values[5] and written > tonumber(values[5]) then
  local over = false
  for i, account in ipairs(chunk_accounts(base_of(job), job)) do
    local total = account_correct(account[1], values[6], written)
    if budget > 0 and total > (i == 1 and budget or math.floor(budget / 2)) then over = true end
  end
  if over then return 'full' end
end
redis.call('HSET', job, 'chunk_bytes', written)
redis.call('RPUSH', chunks, pcm)
redis.call('EXPIRE', chunks, linger)
redis.call('HSET', job, 'chunks_done', index)
local event = {type = 'audio', ts = now, job = snapshot(job),
  chunk = {index = index, segment = segment, duration_s = duration_s, last = last == '1'}}
redis.call('XADD', ev_job, 'MAXLEN', '~', maxlen_job, '*', 'data', cjson.encode(event))
redis.call(DOORBELL, doorbell_of(ev_job), ev_job)
if values[3] == '1' then return 'cancel' end
return 'ok'
