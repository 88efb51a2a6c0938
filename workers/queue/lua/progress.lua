-- A running job finished segment `index` (1-based) of `total`; its encoded audio becomes available.
-- KEYS: job, segments, ev_job, ev_client
-- ARGV: token, index, total, audio, duration_s, now, maxlen_job, maxlen_client, ttl
-- Returns 'ok' | 'cancel' | 'lost'
local job, segments, ev_job, ev_client = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local values = redis.call('HMGET', job, 'state', 'token', 'cancel_requested')
if values[1] ~= 'running' or values[2] ~= ARGV[1] then return 'lost' end
local ttl = tonumber(ARGV[9])
if ARGV[4] ~= '' then
  redis.call('RPUSH', segments, ARGV[4])
  redis.call('EXPIRE', segments, ttl)
end
redis.call('HSET', job, 'segments_done', ARGV[2], 'segments_total', ARGV[3])
emit(job, ev_job, ev_client, 'progress', ARGV[6], ARGV[7], ARGV[8], ttl,
  {segment = {index = tonumber(ARGV[2]), total = tonumber(ARGV[3]),
   duration_s = tonumber(ARGV[5])}})
if values[3] == '1' then return 'cancel' end
return 'ok'
