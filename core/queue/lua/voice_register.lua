-- A voice registered: its metadata (if the name is free), its data and its accounting under its
-- owner and its source address, at once, within their quotas (checked here: read and written in
-- separate steps, concurrent registrations would all pass a cap).
--- keys: voices voice_data *accounts
--- args: name metadata data size:n *quotas
-- accounts: owned_voices(owner) [, owned_voices(source address)]; quotas: for each account, its
-- most voices and its most bytes (0: no limit).
-- Returns 1 | 0 (the name is taken) | {'count' | 'bytes', account (1: owner, 2: address), used}.
if redis.call('HEXISTS', voices, name) == 1 then return 0 end
for i, account in ipairs(accounts) do
  local most_voices, most_bytes = tonumber(quotas[2 * i - 1]), tonumber(quotas[2 * i])
  local sizes = redis.call('HVALS', account)
  if most_voices > 0 and #sizes >= most_voices then return {'count', i, #sizes} end
  local used = 0
  for _, v in ipairs(sizes) do used = used + tonumber(v) end
  if most_bytes > 0 and used + size > most_bytes then return {'bytes', i, used} end
end
redis.call('HSET', voices, name, metadata)
redis.call('HSET', voice_data, name, data)
for _, account in ipairs(accounts) do redis.call('HSET', account, name, size) end
return 1
