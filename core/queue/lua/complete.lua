-- Terminal success, fenced by the attempt token: a stale worker cannot overwrite a reclaimed job.
-- A document's audio stays in its parts (lua/progress.lua): nothing is stored but its size.
-- KEYS: jobs, job, audio, ev_job, ev_client, stats, active, segments, cache (result cache entry;
--       the job key itself when the request is not cacheable), cues, parts
-- ARGV: token, audio, duration_s, sample_rate, now, maxlen_job, maxlen_client, ttl, cached,
--       cache_mode ('hit': answered from the cache, 'miss': store it there, 'off'),
--       audio_size (a document's file size, else ''), cues to append (a JSON array: those no
--       progress stored, i.e. a one-segment job's or a cached result's; '' for none), every
--       cue of the job (a JSON array, kept with a result stored in the cache), the key of the
--       file in the audio store ('' when the audio is ARGV[2], kept in Redis; its size is then
--       ARGV[11]), the key of the cache entry's own copy there ('' when none)
-- Returns {'ok', event_id} | {'stale', state}
local jobs, job, audio, ev_job, ev_client, stats, active, segments =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local values, state = fenced(job, ARGV[1], 'entry')
if not values then return stale(stats, state) end
local ttl = tonumber(ARGV[8])
local size = string.len(ARGV[2])
if ARGV[14] ~= '' then  -- the file is in the audio store, written before this script ran
  size = tonumber(ARGV[11])
  redis.call('HSET', job, 'audio_ref', ARGV[14])
elseif ARGV[11] ~= '' then
  size = tonumber(ARGV[11])
  redis.call('EXPIRE', KEYS[11], ttl)
else
  redis.call('SET', audio, ARGV[2], 'EX', ttl)
end
if ARGV[12] ~= '' then
  for _, cue in ipairs(cjson.decode(ARGV[12])) do redis.call('RPUSH', KEYS[10], cjson.encode(cue)) end
end
redis.call('EXPIRE', KEYS[10], ttl)
redis.call('EXPIRE', segments, ttl)
-- Its storage charge becomes what it keeps: the file and, but for a document (its parts are
-- its file), its segments, about as large again.
recharge(job, redis.call('HGET', job, 'document') == '1' and size or 2 * size)
redis.call('HSET', job, 'state', 'succeeded', 'finished_at', ARGV[5], 'duration_s', ARGV[3],
  'sample_rate', ARGV[4], 'audio_size', size, 'owner', '', 'cached', ARGV[9],
  'error', '')
redis.call('HINCRBY', stats, 'succeeded', 1)
if ARGV[10] == 'hit' then
  redis.call('HINCRBY', stats, 'cache_hits', 1)
elseif ARGV[10] == 'miss' then
  redis.call('HINCRBY', stats, 'cache_misses', 1)
  if ARGV[15] ~= '' then
    redis.call('HDEL', KEYS[9], 'audio')
    redis.call('HSET', KEYS[9], 'audio_ref', ARGV[15], 'audio_size', size)
  else
    redis.call('HDEL', KEYS[9], 'audio_ref', 'audio_size')
    redis.call('HSET', KEYS[9], 'audio', ARGV[2])
  end
  redis.call('HSET', KEYS[9], 'duration_s', ARGV[3], 'sample_rate', ARGV[4], 'cues', ARGV[13])
  redis.call('EXPIRE', KEYS[9], ttl)
  redis.call('HSET', job, 'cache_entry', KEYS[9])  -- it goes with this job if Redis fills
end
redis.call('HINCRBYFLOAT', stats, 'audio_seconds', ARGV[3])
retire(jobs, job, active, values[3], ttl)
return {'ok', (emit(job, ev_job, ev_client, 'succeeded', ARGV[5], ARGV[6], ARGV[7], ttl))}
