"""The Store's keys and scripts on Redis (``threadline.store.redis`` describes the layout; its
operations, ``store/redisops.py``, yield commands on these keys and runs of these scripts): the
key names of one store (``Keys``), sharing the hash tag ``{<store_prefix>}`` so every command
and script touches one cluster slot, and the Lua scripts every write runs in (atomic; each first
checks the type of every key it will touch, so a foreign key under the prefix stops it before
any write).
"""

from __future__ import annotations

import hashlib
import json

LAYOUT_VERSION = 1
_RESERVED = ("item", "ns", "namespaces", "expiry", "meta")


# --- keys -----------------------------------------------------------------------


def member(ns: str, key: str) -> str:
    """An item's name in the index sets: ``["<ns>","<key>"]``."""
    return json.dumps([ns, key], ensure_ascii=False, separators=(",", ":"))


class Keys:
    """The key names of one store (see the module docstring)."""

    def __init__(self, store_prefix: str, vector_prefix: str) -> None:
        for name, text in (("store_prefix", store_prefix), ("vector_prefix", vector_prefix)):
            if not isinstance(text, str) or not text or "{" in text or "}" in text:
                raise ValueError(f"{name} must be a non-empty string without braces (it forms the cluster hash tag), got {text!r}")
        if vector_prefix in _RESERVED:
            raise ValueError(f"vector_prefix may not be one of {_RESERVED}, got {vector_prefix!r}")
        self.base = "{" + store_prefix + "}"
        self.vector = vector_prefix
        self.registry = f"{self.base}:namespaces"
        self.expiry = f"{self.base}:expiry"
        self.meta = f"{self.base}:meta"

    def _id(self, ns: str, key: str) -> str:
        return hashlib.sha1(member(ns, key).encode()).hexdigest()

    def item(self, ns: str, key: str) -> str:
        return f"{self.base}:item:{self._id(ns, key)}"

    def vectors(self, ns: str, key: str) -> str:
        return f"{self.base}:{self.vector}:{self._id(ns, key)}"

    def ns(self, ns: str) -> str:
        return f"{self.base}:ns:{ns}"


# --- Lua: every write is one script ------------------------------------------------

_CHECK = """
local function check(k, want)
  local t = redis.call('TYPE', k)['ok']
  if t ~= 'none' and t ~= want then
    return 'WRONGTYPE threadline store key ' .. k .. ' holds a ' .. t .. ', not a ' .. want ..
      ': something else writes under this store_prefix; delete that key or give the store a prefix of its own'
  end
  return nil
end
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function us(x) return string.format('%.0f', x) end
local function expire(k, exp) redis.call('PEXPIREAT', k, us(math.floor(exp / 1000))) end
"""

# KEYS: registry, expiry, then per op: item, vectors, namespace set.
# ARGV: n ops, then per op: 'del', member, ns, key | 'put', member, ns, key, value, ttl_minutes or '', n vectors, (field, vector)*
WRITE = (
    "#!lua\n"
    + _CHECK
    + """
local err = check(KEYS[1], 'zset') or check(KEYS[2], 'zset')
if err then return redis.error_reply(err) end
for k = 3, #KEYS, 3 do
  err = check(KEYS[k], 'hash') or check(KEYS[k + 1], 'hash') or check(KEYS[k + 2], 'zset')
  if err then return redis.error_reply(err) end
end
local now = now_us()
local i = 2
for n = 0, tonumber(ARGV[1]) - 1 do
  local item, vec, nsz = KEYS[3 + 3 * n], KEYS[4 + 3 * n], KEYS[5 + 3 * n]
  local op, m, ns, key = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  if op == 'del' then
    redis.call('DEL', item, vec)
    redis.call('ZREM', nsz, key)
    if redis.call('ZCARD', nsz) == 0 then redis.call('ZREM', KEYS[1], ns) end
    redis.call('ZREM', KEYS[2], m)
    i = i + 4
  else
    local value, ttl, nvec = ARGV[i + 4], ARGV[i + 5], tonumber(ARGV[i + 6])
    local created = redis.call('HGET', item, 'created_at') or us(now)
    redis.call('DEL', item, vec)
    redis.call('HSET', item, 'ns', ns, 'key', key, 'value', value, 'created_at', created, 'updated_at', us(now))
    for v = 0, nvec - 1 do redis.call('HSET', vec, ARGV[i + 7 + 2 * v], ARGV[i + 8 + 2 * v]) end
    if ttl ~= '' then
      local exp = now + math.floor(tonumber(ttl) * 60000000 + 0.5)
      redis.call('HSET', item, 'ttl_minutes', ttl)
      expire(item, exp)
      if nvec > 0 then expire(vec, exp) end
      redis.call('ZADD', KEYS[2], us(exp), m)
    else
      redis.call('ZREM', KEYS[2], m)
    end
    redis.call('ZADD', nsz, us(now), key)
    redis.call('ZADD', KEYS[1], 0, ns)
    i = i + 7 + 2 * nvec
  end
end
return 1
"""
)

# KEYS: expiry, then per item: item, vectors. ARGV: the members. Restarts each item's TTL.
REFRESH = (
    "#!lua\n"
    + _CHECK
    + """
local err = check(KEYS[1], 'zset')
if err then return redis.error_reply(err) end
for k = 2, #KEYS, 2 do
  err = check(KEYS[k], 'hash') or check(KEYS[k + 1], 'hash')
  if err then return redis.error_reply(err) end
end
local now = now_us()
for n = 1, #ARGV do
  local item, vec = KEYS[2 * n], KEYS[2 * n + 1]
  local ttl = redis.call('HGET', item, 'ttl_minutes')
  if ttl then
    local exp = now + math.floor(tonumber(ttl) * 60000000 + 0.5)
    expire(item, exp)
    if redis.call('EXISTS', vec) == 1 then expire(vec, exp) end
    redis.call('ZADD', KEYS[1], us(exp), ARGV[n])
  end
end
return 1
"""
)

# KEYS: registry, expiry, then per candidate: item, vectors, namespace set. ARGV: per candidate
# member, ns, key. Drops from the index the candidates whose TTL has passed; returns how many.
PURGE = (
    "#!lua\n"
    + _CHECK
    + """
local err = check(KEYS[1], 'zset') or check(KEYS[2], 'zset')
if err then return redis.error_reply(err) end
for k = 3, #KEYS, 3 do
  err = check(KEYS[k + 2], 'zset')
  if err then return redis.error_reply(err) end
end
local now = now_us()
local purged = 0
for n = 0, #ARGV / 3 - 1 do
  local item, vec, nsz = KEYS[3 + 3 * n], KEYS[4 + 3 * n], KEYS[5 + 3 * n]
  local m, ns, key = ARGV[1 + 3 * n], ARGV[2 + 3 * n], ARGV[3 + 3 * n]
  local exp = redis.call('ZSCORE', KEYS[2], m)
  if exp and tonumber(exp) <= now and redis.call('EXISTS', item) == 0 then
    redis.call('DEL', vec)
    redis.call('ZREM', nsz, key)
    if redis.call('ZCARD', nsz) == 0 then redis.call('ZREM', KEYS[1], ns) end
    redis.call('ZREM', KEYS[2], m)
    purged = purged + 1
  end
end
return purged
"""
)

SCRIPTS = {"write": WRITE, "refresh": REFRESH, "purge": PURGE}
SHAS = {name: hashlib.sha1(text.encode()).hexdigest() for name, text in SCRIPTS.items()}
