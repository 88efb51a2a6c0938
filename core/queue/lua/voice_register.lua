-- A voice registered: its metadata (if the name is free), its data and its accounting under its
-- owner and its source address, at once, within their quotas (checked here: read and written in
-- separate steps, concurrent registrations would all pass a cap).
-- KEYS: voices, voice_data, owned_voices(owner) [, owned_voices(source address)].
-- ARGV: name, metadata, data, size, then for each account: its most voices, its most bytes
--       (0: no limit).
-- Returns 1 | 0 (the name is taken) | {'count' | 'bytes', account (1: owner, 2: address), used}.
local size = tonumber(ARGV[4])
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
for i = 3, #KEYS do
  local most_voices, most_bytes = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  local sizes = redis.call('HVALS', KEYS[i])
  if most_voices > 0 and #sizes >= most_voices then return {'count', i - 2, #sizes} end
  local used = 0
  for _, v in ipairs(sizes) do used = used + tonumber(v) end
  if most_bytes > 0 and used + size > most_bytes then return {'bytes', i - 2, used} end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
for i = 3, #KEYS do redis.call('HSET', KEYS[i], ARGV[1], size) end
return 1
