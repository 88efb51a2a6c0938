-- Terminal success, fenced by the attempt token: a stale worker cannot overwrite a reclaimed job.
-- A document's audio stays in its parts (lua/progress.lua); in another format than wav or pcm,
-- its file is the pieces this attempt encoded from them into `draft`, and the parts linger.
--- keys: jobs job audio_key ev_job ev_client stats active segments cache cues parts pieces
--- keys: draft
--- args: token audio duration_s sample_rate now maxlen_job maxlen_client ttl:n cached
--- args: cache_mode audio_size new_cues all_cues audio_ref cache_ref
-- cache: the result cache's entry (the job key itself when the request is not cacheable);
-- cache_mode: 'hit' (answered from the cache), 'miss' (store it there) or 'off'; audio_size:
-- a document's file size, else ''; new_cues: cues to append (a JSON array: those no progress
-- stored, i.e. a one-segment job's or a cached result's; '' for none); all_cues: every cue of
-- the job (a JSON array, kept with a result stored in the cache); audio_ref: the key of the
-- file in the audio store ('' when the audio is `audio`, kept in Redis; its size is then
-- `audio_size`); cache_ref: the key of the cache entry's own copy there ('' when none)
-- Returns {'ok', event_id} | {'stale', state}
local values, state = fenced(job, token, 'entry')
if not values then return stale(stats, state) end
local size = string.len(audio)
if audio_ref ~= '' then  -- the file is in the audio store, written before this script ran
  size = tonumber(audio_size)
  redis.call('HSET', job, 'audio_ref', audio_ref)
elseif audio_size ~= '' then
  size = tonumber(audio_size)
  if redis.call('EXISTS', draft) == 1 then  -- its file is these pieces: its parts go soon
    redis.call('RENAME', draft, pieces)
    redis.call('EXPIRE', pieces, ttl)
    redis.call('EXPIRE', parts, math.min(ttl, PARTS_LINGER_S))
  else
    redis.call('EXPIRE', parts, ttl)
  end
else
  redis.call('SET', audio_key, audio, 'EX', ttl)
end
if new_cues ~= '' then
  for _, cue in ipairs(cjson.decode(new_cues)) do
    redis.call('RPUSH', cues, cjson.encode(cue))
    count_check(job, cue)
  end
end
redis.call('EXPIRE', cues, ttl)
redis.call('EXPIRE', segments, ttl)
-- Its storage charge becomes what it keeps: the file and, but for a document (its parts are its
-- file, or go soon after it is encoded from them), its segments, about as large again.
recharge(job, redis.call('HGET', job, 'document') == '1' and size or 2 * size)
redis.call('HSET', job, 'state', 'succeeded', 'finished_at', now, 'duration_s', duration_s,
  'sample_rate', sample_rate, 'audio_size', size, 'owner', '', 'cached', cached,
  'error', '')
redis.call('HINCRBY', stats, 'succeeded', 1)
if cache_mode == 'hit' then
  redis.call('HINCRBY', stats, 'cache_hits', 1)
elseif cache_mode == 'miss' then
  redis.call('HINCRBY', stats, 'cache_misses', 1)
  if cache_ref ~= '' then
    redis.call('HDEL', cache, 'audio')
    redis.call('HSET', cache, 'audio_ref', cache_ref, 'audio_size', size)
  else
    redis.call('HDEL', cache, 'audio_ref', 'audio_size')
    redis.call('HSET', cache, 'audio', audio)
  end
  redis.call('HSET', cache, 'duration_s', duration_s, 'sample_rate', sample_rate, 'cues', all_cues)
  redis.call('EXPIRE', cache, ttl)
  redis.call('HSET', job, 'cache_entry', cache)  -- it goes with this job if Redis fills
end
redis.call('HINCRBYFLOAT', stats, 'audio_seconds', duration_s)
retire(jobs, job, active, values[3], ttl)
return {'ok', (emit(job, ev_job, ev_client, 'succeeded', now, maxlen_job, maxlen_client, ttl))}
