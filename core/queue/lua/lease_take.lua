-- A live-connection lease: member ARGV[1] holds one of at most ARGV[2] places in KEYS[1] for
-- ARGV[3] seconds (taking it again renews it). Returns 1 when held, 0 when the cap is full.
local t = redis.call('TIME')
local now = t[1] + t[2] / 1e6
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZSCORE', KEYS[1], ARGV[1]) == false
   and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3])))
return 1
