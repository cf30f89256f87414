"""The server-side scripts (Lua) of the Redis statements that must be atomic or that
follow a chain without a round trip per step. Each takes a thread's eight keys
(``layout.thread_keys``) as KEYS, in that order, so it runs in one cluster slot.

TTL (``threadline.ttl``): a thread is subject to TTL once written under one. A put records the
default TTL of the saver that wrote it (``th.dttl``; a put without one keeps the thread's), a run
its own (``th.ttl``, minutes; negative: never). A script that writes a thread ends by giving
every key of the thread the same expiry (``expire``): its own TTL, else its recorded default;
none for a thread never written under a TTL, whatever the saver that writes, reads or tags it
later — a thread never half-expires, its record and tags included. A thread with a tag or a pin (its ``tg`` HASH exists) never expires: TTL expiry
never removes a tagged checkpoint or a pinned thread (``lifecycle.tags``), and on Redis it
removes whole threads.
"""

from __future__ import annotations

from threadline.codec.refs import PLAIN_REF_TYPE, REF_JSON_AT

# Whether a guard lease's value ``v`` (``LEASE``) has this holder and token.
_HOLDS = r"""
local function holds(v, holder, token)
  return v and string.sub(v, 1, #holder + 1) == holder .. '\0' and string.match(v, '%z(%d+)$') == token
end
"""

_COMMON = _HOLDS + r"""
local SEP = '\0'
local function btype(v) local i = string.find(v, SEP, 1, true); return string.sub(v, 1, i - 1) end
local function bbase(v)
  local i = string.find(v, SEP, 1, true); local j = string.find(v, SEP, i + 1, true)
  return string.sub(v, i + 1, j - 1)
end
local function bsize(v)
  local i = string.find(v, SEP, 1, true); local j = string.find(v, SEP, i + 1, true)
  return #v - j - 1
end
-- the arguments, sent as one string of length-prefixed parts (``base.frame``): one argument
-- to encode instead of dozens (the client's per-argument cost is most of a put's)
local function unframe(s)
  local out, i, n = {}, 1, #s
  while i <= n do
    local v; v, i = struct.unpack('>I4c0', s, i)
    out[#out + 1] = v
  end
  return out
end
local function expire(default)
  local own = redis.call('HGET', KEYS[6], 'ttl')
  local given = tonumber(default) or 0
  -- a put's default TTL is recorded on the thread: the TTL it is subject to from then on
  if given > 0 then redis.call('HSET', KEYS[6], 'dttl', default) end
  local minutes = tonumber(own) or (given > 0 and given) or tonumber(redis.call('HGET', KEYS[6], 'dttl') or '') or 0
  if redis.call('EXISTS', KEYS[8]) == 1 then minutes = -1 end
  for i = 1, 8 do
    if minutes > 0 then redis.call('PEXPIRE', KEYS[i], math.floor(minutes * 60000))
    elseif minutes < 0 then redis.call('PERSIST', KEYS[i]) end
  end
end
"""

# ``latest(ns)``: the field (ns \0 checkpoint_id) of the namespace's latest checkpoint, or nil
_LATEST = r"""
local function latest(ns)
  return redis.call('ZRANGE', KEYS[2], '(' .. ns .. '\1', '[' .. ns .. '\0', 'BYLEX', 'REV', 'LIMIT', 0, 1)[1]
end
"""

# ARGV[1], framed (``base.frame``): checkpoint field, packed row, parent field ('' none), whether
# a new row needs its parent ('1'/'0'), checked rows expected, bytes added, now, the default TTL
# minutes to record (0: keep the thread's), blob count, then per blob: field, packed value, base field ('' snapshot), base type, base size, checked ('1'/'0');
# then the thread_id, and for a checkpoint of the root namespace its blob fields ('\1'-separated), kept
# as ``wix`` field ``latest_blobs`` while it is the namespace's latest (for GET). KEYS[9], on a single server only: the thread index, updated here (on a
# cluster it lives in another slot, and the caller updates it in the same round trip).
# → {checked rows stored as written, row written (1/0), existed before (1/0), parent stored (1/0)}
# Under a guard lease: ARGV[2], ARGV[3] its holder and token, KEYS[9] the lease (the index, if
# any, KEYS[10]); nothing is written unless the lease holds, and the reply has a fifth element,
# whether it held (1/0).
PUT = _COMMON + _LATEST + r"""
local A = unframe(ARGV[1])
local index, held = KEYS[9], nil
if ARGV[2] then
  index, held = KEYS[10], 1
  if not holds(redis.call('GET', KEYS[9]), ARGV[2], ARGV[3]) then return {0, 0, 0, 0, 0} end
end
local existed = redis.call('HEXISTS', KEYS[1], A[1])
local parent_ok = 1
if A[4] == '1' then parent_ok = redis.call('HEXISTS', KEYS[1], A[3]) end
if existed == 0 and parent_ok == 0 then return {0, 0, 0, 0, held} end
local stored = 0
for b = 10, 9 + 6 * tonumber(A[9]), 6 do
  local f, v = A[b], A[b + 1]
  local ok = true
  if A[b + 2] ~= '' then
    local base = redis.call('HGET', KEYS[3], A[b + 2])
    ok = base and btype(base) == A[b + 3] and bsize(base) == tonumber(A[b + 4])
  end
  if ok then redis.call('HSETNX', KEYS[3], f, v) end
  if A[b + 5] == '1' then
    local cur = redis.call('HGET', KEYS[3], f)
    if cur and btype(cur) == btype(v) and bsize(cur) == bsize(v) then stored = stored + 1 end
  end
end
if stored ~= tonumber(A[5]) then return {stored, 0, existed, parent_ok, held} end
redis.call('HSET', KEYS[1], A[1], A[2])
redis.call('ZADD', KEYS[2], 0, A[1])
local now = tonumber(A[7])
local updated = tonumber(redis.call('HGET', KEYS[6], 'updated') or '')
if updated == nil then
  redis.call('HSET', KEYS[6], 'created', A[7], 'updated', A[7], 'count', 0, 'bytes', 0)
elseif now >= updated + 1 then
  redis.call('HSET', KEYS[6], 'updated', A[7])
end
if existed == 0 then redis.call('HINCRBY', KEYS[6], 'count', 1) end
redis.call('HINCRBY', KEYS[6], 'bytes', tonumber(A[6]))
local listed = A[11 + 6 * tonumber(A[9])]
if listed and listed ~= '' and latest('') == A[1] then  -- the root namespace's latest: its blob fields, for GET
  redis.call('HSET', KEYS[5], 'latest_blobs', A[1] .. '\2' .. listed)
end
expire(A[8])  -- last: every key the put wrote gets the thread's expiry
if index then redis.call('ZADD', index, 'GT', A[7], A[10 + 6 * tonumber(A[9])]) end
return {stored, 1, existed, parent_ok, held}
"""

# ARGV[1], framed: replace ('1': special channels, last write wins; '0': insert-or-ignore), the
# checkpoint field of a running graph's writes ('' none: see ``insert_writes(live=)`` of the SQL
# statements), then per row: field, packed row. → the 1-based positions of the rows inserted.
# Under a guard lease: ARGV[2], ARGV[3] its holder and token, KEYS[9] the lease; {0} when it does
# not hold (nothing written).
WRITES = _COMMON + r"""
local A = unframe(ARGV[1])
local inserted = {}
if ARGV[2] and not holds(redis.call('GET', KEYS[9]), ARGV[2], ARGV[3]) then return {0} end
if A[2] ~= '' and redis.call('HEXISTS', KEYS[1], A[2]) == 0 then
  local ns = string.match(A[2], '^[^%z]*')
  if #redis.call('ZRANGE', KEYS[2], '(' .. A[2], '(' .. ns .. '\1', 'BYLEX', 'LIMIT', 0, 1) > 0 then return inserted end
end
local function index(f)
  local ck = string.match(f, '^[^%z]*%z[^%z]*')
  local cur = redis.call('HGET', KEYS[5], ck)
  local member = string.sub(f, #ck + 2)
  redis.call('HSET', KEYS[5], ck, cur and (cur .. '\1' .. member) or member)
end
for i = 3, #A, 2 do
  if A[1] == '1' then
    if redis.call('HSET', KEYS[4], A[i], A[i + 1]) == 1 then index(A[i]) end
  elseif redis.call('HSETNX', KEYS[4], A[i], A[i + 1]) == 1 then
    index(A[i])
    inserted[#inserted + 1] = (i - 1) / 2
  end
end
if redis.call('EXISTS', KEYS[6]) == 1 then expire(0) end
return inserted
"""

# ``follow(fields)``: field, value pairs of the blobs of those fields that are stored and of every
# base their deltas are built on; ``writes_of(fields)``: field, row pairs of every pending write of
# those checkpoint fields (ns \0 checkpoint_id).
_READS = r"""
local function follow(todo)
  local out, seen = {}, {}
  local n = 1
  while n <= #todo do
    local f = todo[n]
    n = n + 1
    if not seen[f] then
      seen[f] = true
      local v = redis.call('HGET', KEYS[3], f)
      if v then
        out[#out + 1] = f
        out[#out + 1] = v
        local i = string.find(v, '\0', 1, true); local j = i and string.find(v, '\0', i + 1, true)
        local base = j and string.sub(v, i + 1, j - 1) or ''  -- a damaged value: returned, for the reader to name
        local k = string.find(f, '\0', 1, true); local l = k and string.find(f, '\0', k + 1, true)
        if base ~= '' and l then todo[#todo + 1] = string.sub(f, 1, l) .. base end
      end
    end
  end
  return out
end
local function writes_of(fields)
  local out = {}
  for i = 1, #fields do
    local listed = redis.call('HGET', KEYS[5], fields[i])
    if listed then
      local found = {}
      for member in string.gmatch(listed, '[^\1]+') do found[#found + 1] = fields[i] .. '\0' .. member end
      local rows = redis.call('HMGET', KEYS[4], unpack(found))
      for j = 1, #found do
        if rows[j] then out[#out + 1] = found[j]; out[#out + 1] = rows[j] end
      end
    end
  end
  return out
end
-- ``named_by(blobs, skip)``: the checkpoint fields whose writes the delta-ref rows among ``blobs``
-- (field, value pairs) name, but ``skip``: where a row is checksummed and neither compressed nor
-- encrypted, its checkpoint_id read from its bytes unchecked (the reader checks the seal and parses
-- the row), only to fetch those writes in the same round trip.
local function named_by(blobs, skip)
  local named, seen = {}, {[skip] = true}
  for i = 2, #blobs, 2 do
    local v = blobs[i]
    local a = string.find(v, '\0', 1, true)
    local b = a and string.find(v, '\0', a + 1, true)
    local at = b and b + 2 + REF_JSON_AT  -- the JSON's '[' (the flag byte after b, then the sealed bytes)
    if at and string.sub(v, 1, a - 1) == 'PLAIN_REF_TYPE' and string.sub(v, b + 1, b + 1) == '1' and string.sub(v, at, at + 1) == '["' then
      local e = string.find(v, '"', at + 2, true)
      local ns_end = string.find(blobs[i - 1], '\0', 1, true)
      local ck = e and ns_end and string.sub(blobs[i - 1], 1, ns_end) .. string.sub(v, at + 2, e - 1)
      if ck and not seen[ck] then seen[ck] = true; named[#named + 1] = ck end
    end
  end
  return named
end
""".replace("PLAIN_REF_TYPE", PLAIN_REF_TYPE).replace("REF_JSON_AT", str(REF_JSON_AT))

# ARGV: blob fields. → field, value pairs of those stored and of every base their deltas are built on
CHAINS = _READS + r"""
local todo = {}
for i = 1, #ARGV do todo[#todo + 1] = ARGV[i] end
return follow(todo)
"""


# ARGV: namespace ('' the root). → {field, row} of the namespace's latest checkpoint, or {}
LATEST = _LATEST + r"""
local found = latest(ARGV[1])
if not found then return {} end
return {found, redis.call('HGET', KEYS[1], found)}
"""

# ``get_tuple`` in one round trip. ARGV: namespace, checkpoint_id ('' the latest), then the blob
# fields the reader holds. → {} when there is no such checkpoint, else {field, row, the blob fields
# followed ('\1'-separated, '' none), {blob field, value…}, {its write field, row…}, {write field,
# row…} of the checkpoints the delta-ref blobs name}. The blobs followed are those the root
# namespace's latest put listed for the checkpoint (``wix`` field ``latest_blobs``, written by PUT:
# checkpoint field '\2' blob fields), but the reader's; the reader reads any other it needs after.
# A delta-ref row's checkpoint_id is read from its bytes unchecked, where it is not compressed or
# encrypted, only to fetch those writes here: the reader checks the row's seal and parses it.
GET = _READS + _LATEST + r"""
local ns, field = ARGV[1], ARGV[1] .. '\0' .. ARGV[2]
if ARGV[2] == '' then field = latest(ns) end
local raw = field and redis.call('HGET', KEYS[1], field)
if not raw then return {} end
local todo, listed = {}, ''
local hint = ns == '' and redis.call('HGET', KEYS[5], 'latest_blobs')
if hint and string.sub(hint, 1, #field + 1) == field .. '\2' then
  local held = {}
  for i = 3, #ARGV do held[ARGV[i]] = true end
  listed = string.sub(hint, #field + 2)
  for f in string.gmatch(listed, '[^\1]+') do
    if not held[f] then todo[#todo + 1] = f end
  end
end
local blobs = follow(todo)
return {field, raw, listed, blobs, writes_of({field}), writes_of(named_by(blobs, field))}
"""

# ARGV: blob fields. → {field, value pairs of those stored and of every base their deltas are built on,
# field, row pairs of the writes their delta-ref rows name} (as GET's)
BLOBS = _READS + r"""
local todo = {}
for i = 1, #ARGV do todo[#todo + 1] = ARGV[i] end
local blobs = follow(todo)
return {blobs, writes_of(named_by(blobs, ''))}
"""

# ARGV: checkpoint fields (ns \0 checkpoint_id). → field, row pairs of every write of those checkpoints
WRITES_OF = _READS + r"""
local fields = {}
for i = 1, #ARGV do fields[i] = ARGV[i] end
return writes_of(fields)
"""

# ARGV: [own TTL minutes to record ('' keep)]. Restarts the expiry of a thread subject to TTL.
EXPIRE = _COMMON + r"""
if ARGV[1] and ARGV[1] ~= '' then redis.call('HSET', KEYS[6], 'ttl', ARGV[1]) end
if redis.call('EXISTS', KEYS[6]) == 1 then expire(0) end
return 1
"""

# A sweep of the whole database (``threadline.ttl``): a thread written without a TTL (no ``ttl``,
# no ``dttl``), untagged and unpinned, whose last activity is ARGV[2] (now) - ARGV[1] (minutes) * 60
# or older is deleted, its eight keys at once. → its checkpoint count, or -1 when it is kept.
EXPIRE_IDLE = r"""
local th = redis.call('HMGET', KEYS[6], 'count', 'ttl', 'dttl', 'updated', 'accessed')
if not th[1] or th[2] or th[3] or redis.call('EXISTS', KEYS[8]) == 1 then return -1 end
local last = math.max(tonumber(th[4]) or 0, tonumber(th[5]) or 0)
if last + tonumber(ARGV[1]) * 60 > tonumber(ARGV[2]) then return -1 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8])
return tonumber(th[1])
"""

# The sweeper's job lease. KEYS: the job's record (HASH: owner, lease_until, started_at,
# finished_at, result) and its lease (STRING: the owner, expiring with the lease), one hash tag.
# ARGV 'claim', owner, now, lease ms, latest finish allowed → 1 when won (SET NX PX);
# 'renew', owner, lease_until, lease ms → 1 while owner holds it; 'finish', owner, now, result.
SWEEP = r"""
local op, owner = ARGV[1], ARGV[2]
if op == 'claim' then
  local finished = tonumber(redis.call('HGET', KEYS[1], 'finished_at') or '')
  if finished and finished > tonumber(ARGV[5]) then return 0 end
  if not redis.call('SET', KEYS[2], owner, 'NX', 'PX', ARGV[4]) then return 0 end
  redis.call('HSET', KEYS[1], 'owner', owner, 'lease_until', tonumber(ARGV[3]) + tonumber(ARGV[4]) / 1000, 'started_at', ARGV[3])
  return 1
end
if op == 'renew' then
  if redis.call('GET', KEYS[2]) ~= owner then return 0 end
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  redis.call('HSET', KEYS[1], 'lease_until', ARGV[3])
  return 1
end
if redis.call('HGET', KEYS[1], 'owner') ~= owner then return 0 end
if redis.call('GET', KEYS[2]) == owner then redis.call('DEL', KEYS[2]) end
redis.call('HSET', KEYS[1], 'lease_until', 0, 'finished_at', ARGV[3], 'result', ARGV[4])
return 1
"""

# A thread's guard lease (``storage/redis/leases.py``). KEYS[1]: the lease (STRING: holder, NUL,
# acquired_at in ms of the server's clock, NUL, token; its expiry is the lease's end); KEYS[2]: the
# thread's token count (STRING: the last token given; kept a day past the last lease). ARGV:
# 'take', holder, lease ms → {1 won / 0 busy, value, ms left, now ms}: won when no lease is set or
# holder's own, with the next token; busy: the other holder's value and ms left.
# 'renew', holder, lease ms, token → won while the lease has that holder and token, or has expired
# with no other run taking it since (the count is still that token). 'read' → {0, value or false,
# ms left, now ms}; 'release', holder, token → deleted when it has that holder and token.
LEASE = _HOLDS + r"""
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local op, cur = ARGV[1], redis.call('GET', KEYS[1])
if op == 'release' then
  if holds(cur, ARGV[2], ARGV[3]) then redis.call('DEL', KEYS[1]) end
  return 1
end
local won = false
if op == 'take' and (not cur or string.sub(cur, 1, #ARGV[2] + 1) == ARGV[2] .. '\0') then
  cur = ARGV[2] .. '\0' .. now .. '\0' .. redis.call('INCR', KEYS[2])
  won = true
elseif op == 'renew' and (holds(cur, ARGV[2], ARGV[4]) or (not cur and redis.call('GET', KEYS[2]) == ARGV[4])) then
  cur = cur or (ARGV[2] .. '\0' .. now .. '\0' .. ARGV[4])
  won = true
end
if won then
  redis.call('SET', KEYS[1], cur, 'PX', ARGV[3])
  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[3]) + 86400000)
  return {1, cur, tonumber(ARGV[3]), now}
end
return {0, cur, redis.call('PTTL', KEYS[1]), now}
"""

SCRIPTS = {"sweep": SWEEP, "lease": LEASE, "put": PUT, "writes": WRITES, "chains": CHAINS, "latest": LATEST, "get": GET, "blobs": BLOBS, "writes_of": WRITES_OF, "expire": EXPIRE,
           "expire_idle": EXPIRE_IDLE}
