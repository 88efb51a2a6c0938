-- A running job finished segment `index` (1-based) of `total`, in order: its audio becomes
-- available (a document's as a part, 16-bit PCM after its pause; any other job's encoded in the
-- job's format), its subtitle cue is stored, and a `progress` event says how far the job is.
-- KEYS: job, segments, ev_job, ev_client, parts, cues
-- ARGV: token, index, total, audio, duration_s, now, maxlen_job, maxlen_client, ttl, cue_json,
--       samples (this segment's, its leading pause included), sample_rate, eta (unix time, or
--       ''), document ('1' | '0'), slice_s (a document of the fair waiting room gives its worker
--       back once it made this much speech since it was taken and another client's work
--       waits; '': never)
-- Returns 'ok' | 'cancel' | 'lost' | 'yield' (release it: release.lua; idempotent for the
--       last segment stored)
local job, segments, ev_job, ev_client, parts, cues =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local values = fenced(job, ARGV[1], 'cancel_requested', 'segments_done', 'who',
  'taken_audio_s')
if not values then return 'lost' end
local index = tonumber(ARGV[2])
local done = tonumber(values[4] or '0')
-- Once each, in order: a resumed document continues after its last stored part. The last one
-- again is the same attempt retrying a call whose answer it lost: stored already.
if index == done and done > 0 then
  if values[3] == '1' then return 'cancel' end
  return 'ok'
end
if index ~= done + 1 then return 'lost' end
local ttl = tonumber(ARGV[9])
if ARGV[14] == '1' then
  redis.call('RPUSH', parts, ARGV[4])
  redis.call('EXPIRE', parts, ttl)
elseif ARGV[4] ~= '' then
  redis.call('RPUSH', segments, ARGV[4])
  redis.call('EXPIRE', segments, ttl)
end
redis.call('RPUSH', cues, ARGV[10])
redis.call('EXPIRE', cues, ttl)
local samples = redis.call('HINCRBY', job, 'samples_done', tonumber(ARGV[11]))
local audio_s = samples / tonumber(ARGV[12])
redis.call('HSET', job, 'segments_done', index, 'segments_total', ARGV[3], 'audio_s', audio_s)
emit(job, ev_job, ev_client, 'progress', ARGV[6], ARGV[7], ARGV[8], ttl,
  {segment = {index = index, total = tonumber(ARGV[3]), duration_s = tonumber(ARGV[5])},
   audio_s = audio_s, eta = tonumber(ARGV[13])})
if values[3] == '1' then return 'cancel' end
local who = values[5]
if ARGV[14] == '1' and ARGV[15] ~= '' and who and index < tonumber(ARGV[3])
    and audio_s - tonumber(values[6] or '0') >= tonumber(ARGV[15]) then
  local base = base_of(job)
  local others = redis.call('ZCARD', base .. ':lane:i') + redis.call('ZCARD', base .. ':lane:b')
    + redis.call('ZCARD', base .. ':lane:s')
  if redis.call('ZSCORE', base .. ':lane:b', who) then others = others - 1 end
  if others > 0 then return 'yield' end
end
return 'ok'
