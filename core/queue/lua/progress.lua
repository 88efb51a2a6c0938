-- A running job finished segment `index` (1-based) of `total`, in order: its audio becomes
-- available (a document's as a part, 16-bit PCM after its pause; any other job's encoded in the
-- job's format), its subtitle cue is stored, and a `progress` event says how far the job is.
--- keys: job segments ev_job ev_client parts cues
--- args: token index:n total:n audio duration_s:n now maxlen_job maxlen_client ttl:n cue
--- args: samples:n sample_rate:n eta:n document slice_s
-- cue: its JSON; samples: this segment's, its leading pause included; eta: unix time (''
-- none); document: '1' | '0'; slice_s: a document of the fair waiting room gives its worker
-- back once it made this much speech since it was taken and another client's work waits ('':
-- never)
-- Returns 'ok' | 'cancel' | 'lost' | 'yield' (release it: release.lua; idempotent for the
--       last segment stored)
local values = fenced(job, token, 'cancel_requested', 'segments_done', 'who',
  'taken_audio_s')
if not values then return 'lost' end
local done = tonumber(values[4] or '0')
-- Once each, in order: a resumed document continues after its last stored part. The last one
-- again is the same attempt retrying a call whose answer it lost: stored already.
if index == done and done > 0 then
  if values[3] == '1' then return 'cancel' end
  return 'ok'
end
if index ~= done + 1 then return 'lost' end
if document == '1' then
  redis.call('RPUSH', parts, audio)
  redis.call('EXPIRE', parts, ttl)
elseif audio ~= '' then
  redis.call('RPUSH', segments, audio)
  redis.call('EXPIRE', segments, ttl)
end
redis.call('RPUSH', cues, cue)
redis.call('EXPIRE', cues, ttl)
local check = count_check(job, cjson.decode(cue))
local samples_done = redis.call('HINCRBY', job, 'samples_done', samples)
local audio_s = samples_done / sample_rate
redis.call('HSET', job, 'segments_done', index, 'segments_total', total, 'audio_s', audio_s)
emit(job, ev_job, ev_client, 'progress', now, maxlen_job, maxlen_client, ttl,
  {segment = {index = index, total = total, duration_s = duration_s, check = check},
   audio_s = audio_s, eta = eta})
if values[3] == '1' then return 'cancel' end
local who = values[5]
if document == '1' and slice_s ~= '' and who and index < total
    and audio_s - tonumber(values[6] or '0') >= tonumber(slice_s) then
  local base = base_of(job)
  local others = redis.call('ZCARD', K.lane(base, 'i')) + redis.call('ZCARD', K.lane(base, 'b'))
    + redis.call('ZCARD', K.lane(base, 's'))
  if redis.call('ZSCORE', K.lane(base, 'b'), who) then others = others - 1 end
  if others > 0 then return 'yield' end
end
return 'ok'
