-- A voice registered: its metadata (if the name is free), its data and its owner's accounting,
-- at once. KEYS: voices, voice_data, owned_voices(owner) [, owned_voices(source address)].
-- ARGV: name, metadata, data, size.
-- Returns 1, or 0 when the name is taken.
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
for i = 3, #KEYS do redis.call('HSET', KEYS[i], ARGV[1], ARGV[4]) end
return 1
