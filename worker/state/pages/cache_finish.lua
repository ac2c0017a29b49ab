-- The end of a page flight (worker/state/pages/cache.py, PageCache._publish): the outcome into the
-- cache when it is kept, the flight's lease released, and the outcome to the jobs waiting on it.
--
-- KEYS: 1 the page's entry, 2 its flight lease, 3 the flight's done list, 4 the index (sorted set
-- of "entry key|bytes" members by expiry ms), 5 the total bytes.
-- ARGV: 1 token, 2 the outcome, 3 what to cache (cache.py, Store): '1' the outcome, '2' the entry
-- that names the page's document (ARGV 14) when the document is kept here, '0' nothing, 4 its time to live ms, 5 the cache's bound in
-- bytes, 6 the done list's ms, 7 the most evictions, 8 the most expired index entries to drop,
-- 9 how long the bookkeeping keys live (ms: longer than any entry, so they outlive every entry they
-- count), 10 '1' to renew the bookkeeping's time to live (each worker does at most once a minute),
-- 11 the flight lease's ms, 12 what Redis has free beyond its headroom (bytes, negative past it; ''
-- when its memory bounds nothing): the bound is then worker.state.memory.cache_bound's, with what
-- the cache holds read here rather than by a command of its own; a document kept here is bounded
-- by the same room (documents.py). 13 now (Redis's clock, ms:
-- worker.state.clock). 14 the entry that names the kept document instead ('' for none).
-- A leading fetch that kept its document passes the keep's keys and arguments after these
-- (documents.py, KEEP_FUNCTION: KEYS 6 to 9, ARGV 15 to 21), and it is kept in this same step.
-- Returns {1 when the entry was kept, 1 when the document was}.
--
-- One script, so a newcomer never sees the lease gone before the page is in the cache (it would
-- fetch again), the waiters' outcome and the lease's end land together, and the bookkeeping never
-- disagrees with itself between two workers' stores. Evicted keys come from the index, not KEYS.
--
-- A page whose document is kept in this step is cached as the short entry that names it (ARGV 14):
-- its record and text are the document's, so the text is stored once, and the entry is one SET
-- that lives its time to live outside the index (it is a few hundred bytes; the bytes it stands for
-- are the document's, which its own index bounds and sheds). A page whose document did not fit is
-- not cached. What is cached whole (a failure, a page without a document) is indexed and sized:
--
-- The common store is a handful of commands: an entry's size travels in its index member, so one
-- ZADD indexes and sizes it, the counter is one INCRBY, and expired entries are swept only when the
-- counter says the cache is over its bound (their bytes stay counted until then, which errs on the
-- side of the bound). A page stored again with another size (a fresh fetch) leaves its old member
-- counted until it is swept or evicted; evicting it removes the page only while the page is still
-- the one it counted (STRLEN), never its successor.
local kept, document = 0, 0
local now = tonumber(ARGV[13])
if #KEYS > 5 then
  document = keep_document({unpack(KEYS, 6, 9)}, {unpack(ARGV, 15, 21)}, now, ARGV[12])
end
if ARGV[3] == '2' and document == 1 then
  redis.call('SET', KEYS[1], ARGV[14], 'PX', ARGV[4])
  kept = 1
elseif ARGV[3] == '1' then
  local size = string.len(ARGV[2])
  local bound = tonumber(ARGV[5])
  local mine = KEYS[1] .. '|' .. size
  local function parse(member)
    local key, bytes = string.match(member, '^(.*)|(%d+)$')
    return key or member, tonumber(bytes or '0')
  end
  local grown = 0
  if redis.call('ZADD', KEYS[4], now + tonumber(ARGV[4]), mine) == 1 then
    grown = size
  end
  local total = redis.call('INCRBY', KEYS[5], grown)
  if ARGV[12] ~= '' then
    bound = math.max(0, math.min(bound, total - grown + tonumber(ARGV[12])))
  end
  local freed = 0
  if total > bound then
    for _, member in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, tonumber(ARGV[8]))) do
      if member ~= mine then
        local _, bytes = parse(member)
        redis.call('ZREM', KEYS[4], member)
        freed = freed + bytes
      end
    end
    local evicted = 0
    while total - freed > bound and evicted < tonumber(ARGV[7]) do
      local oldest = redis.call('ZRANGE', KEYS[4], 0, 0)
      if #oldest == 0 or oldest[1] == mine then
        break
      end
      local key, bytes = parse(oldest[1])
      redis.call('ZREM', KEYS[4], oldest[1])
      freed = freed + bytes
      if key ~= KEYS[1] and redis.call('STRLEN', key) == bytes then
        redis.call('UNLINK', key)
      end
      evicted = evicted + 1
    end
  end
  if total - freed <= bound then
    redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[4])
    kept = 1
  else
    redis.call('ZREM', KEYS[4], mine)
    freed = freed + grown
    redis.call('UNLINK', KEYS[1])
  end
  if freed > 0 then
    redis.call('DECRBY', KEYS[5], freed)
  end
  if ARGV[10] == '1' or total == grown then
    redis.call('PEXPIRE', KEYS[4], ARGV[9])
    redis.call('PEXPIRE', KEYS[5], ARGV[9])
  end
end
-- The lease is the token, followed by a '+' for each job that joined the flight: the outcome is
-- pushed to the done list only when somebody waits for it (or the lease is no longer this job's,
-- when a waiter may be watching the done list too).
--
-- GETDEL reads and ends the lease in one command. When the lease is no longer this job's (it
-- lapsed and another job leads the flight now), it goes back at once, in this same step, with a
-- whole lease time: the new leader renews it to that every beat anyway.
local holder = redis.call('GETDEL', KEYS[2])
local mine = holder and string.sub(holder, 1, #ARGV[1]) == ARGV[1]
if holder and not mine then
  redis.call('SET', KEYS[2], holder, 'PX', ARGV[11])
end
if not mine or #holder > #ARGV[1] then
  redis.call('RPUSH', KEYS[3], ARGV[2])
  redis.call('PEXPIRE', KEYS[3], ARGV[6])
end
return {kept, document}
