"""Redis stores: ``RedisStore`` (redis-py sync) and ``AsyncRedisStore`` (``redis.asyncio``), on plain
Redis 7 and Redis Cluster, with no modules (no RedisJSON, no RediSearch).

Same constructors and ``from_conn_string`` as LangGraph's official ``langgraph.store.redis``
classes (``conn`` / ``redis_url``, ``redis_client``, ``connection_args``, ``index``, ``ttl``,
``cluster_mode``, ``store_prefix``, ``vector_prefix``), and the same semantics as
threadline's SQL stores: the batch is checked and encoded by ``store.ops.plan`` (one copy of
every input rule), values are canonical JSON (``store.values``), filters mean what they
mean there (``store.pyfilter``).

Keys (``S`` = ``store_prefix``, ``V`` = ``vector_prefix``), all sharing the hash tag ``{S}``,
so every command and script touches one cluster slot (no CROSSSLOT):

* ``{S}:item:<id>`` — a hash per item: ``ns`` (labels joined by ``.``), ``key``, ``value``
  (JSON), ``created_at``, ``updated_at`` (microseconds since the epoch, server time),
  ``ttl_minutes`` (only with a TTL); Redis expires it (``PEXPIREAT``) when its TTL ends.
  ``<id>`` is the SHA-1 of the member ``["<ns>","<key>"]`` (JSON).
* ``{S}:V:<id>`` — a hash of the item's vectors (only with ``index=``): field name → the
  float32 vector, base64; expires with the item.
* ``{S}:ns:<ns>`` — a sorted set per namespace: its keys, scored by ``updated_at``.
* ``{S}:namespaces`` — a sorted set of every namespace (score 0, so ordered by bytes).
* ``{S}:expiry`` — a sorted set of the members with a TTL, scored by their expiry time.
* ``{S}:meta`` — a hash: ``version`` of this layout, ``dims`` of the stored vectors.

Every batch's puts and deletes run in one Lua script (atomic; the script first checks the
type of every key it will touch, so a foreign key under the prefix stops it before any
write). Reads never scan the keyspace: they walk the namespace index. Items whose TTL
ended leave the index in the next ``sweep_ttl`` (which ``search`` and ``list_namespaces``
run first), so they are never listed.

Search with a ``filter`` or a ``query`` reads every item of the namespace prefix and
decides in Python (vectors are scored exactly, cosine, L2 or inner product); it refuses a
prefix holding more than ``scan_limit`` items (default ``SCAN_LIMIT`` = 10,000) with
``ScanLimitError``. A plain search reads only the index and the page it returns.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import redis
import redis.asyncio
from langgraph.store.base import IndexConfig, ListNamespacesOp, Op, Result, SearchItem, SearchOp, TTLConfig
from redis import exceptions as rex

from threadline.backends import redisconn
from threadline.errors import CorruptRowError, SchemaError, ThreadlineError
from threadline.store import ops as O
from threadline.store import values as V
from threadline.storage import vecmath
from threadline.store.base import AsyncStore, SyncStore
from threadline.store.pyfilter import compile_filter

logger = logging.getLogger(__name__)

SCAN_LIMIT = 10_000  # items a filtered or semantic search may read
LAYOUT_VERSION = 1
SWEEP_PAGE = 1000
STORE_PREFIX = "store"
VECTOR_PREFIX = "store_vectors"
_RESERVED = ("item", "ns", "namespaces", "expiry", "meta")


class ScanLimitError(ThreadlineError, ValueError):
    """A filtered or semantic search would read more items than the store's ``scan_limit``."""


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


# --- sans-IO operations ---------------------------------------------------------------


@dataclass
class Cmds:
    """Commands for one pipelined round trip: (client method, args, kwargs); their replies come back in order."""

    commands: list[tuple[str, tuple, dict]] = field(default_factory=list)

    def add(self, method: str, *args: Any, **kwargs: Any) -> Cmds:
        self.commands.append((method, args, kwargs))
        return self


@dataclass
class Call:
    """One script run: ``SCRIPTS[name]`` with ``keys`` and ``args``; its reply comes back."""

    name: str
    keys: list[str]
    args: list[Any]


RedisOp = Generator[Cmds | Call, Any, Any]


def _s(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


@dataclass
class Row:
    """An item as stored: times in seconds, ``ttl`` in minutes or None."""

    ns: str
    key: str
    value: dict[str, Any]
    created: float
    updated: float
    ttl: float | None


FIELDS = ("value", "created_at", "updated_at", "ttl_minutes")


def _row(keys: Keys, ns: str, key: str, reply: list[Any], loader: Any) -> Row | None:
    """The item from ``HMGET <item> value created_at updated_at ttl_minutes``, None when it is
    gone; CorruptRowError naming the key when the hash is not one this store wrote."""
    raw, created, updated, ttl = reply
    if raw is None and created is None and updated is None:
        return None
    where = f"Redis store key {keys.item(ns, key)} (item {V.ns_tuple(ns)!r}/{key!r})"
    try:
        times = (int(_s(created)) / 1e6, int(_s(updated)) / 1e6)
        minutes = None if ttl is None else float(_s(ttl))
    except (TypeError, ValueError) as exc:
        raise CorruptRowError(f"{where}: created_at/updated_at/ttl_minutes are not numbers ({exc}); delete the key") from exc
    value = V.loads(None if raw is None else _s(raw), where, loader)
    return Row(ns, key, value, times[0], times[1], minutes)


def _vectors(name: str, reply: dict[Any, Any]) -> dict[str, bytes]:
    """An item's vectors from ``HGETALL``: field → float32 bytes; CorruptRowError naming the key."""
    try:
        out = {_s(f): base64.b64decode(v, validate=True) for f, v in reply.items()}
    except ValueError as exc:
        raise CorruptRowError(f"Redis store key {name}: a vector is not base64 ({exc}); delete the key") from exc
    if any(len(v) % 4 for v in out.values()):
        raise CorruptRowError(f"Redis store key {name}: a vector is not float32 values; delete the key")
    return out


def _search_item(row: Row, score: float | None) -> SearchItem:
    return SearchItem(
        namespace=V.ns_tuple(row.ns),
        key=row.key,
        value=row.value,
        created_at=V.stamp(row.created),
        updated_at=V.stamp(row.updated),
        score=score,
    )


def _similarity(distance: str, query: bytes, stored: bytes) -> float | None:
    if distance == "cosine":
        d = vecmath.distance_cosine(stored, query)
        return None if d is None else 1.0 - d
    if distance == "l2":
        return -vecmath.distance_l2(stored, query)
    return sum(a * b for a, b in zip(vecmath.floats(stored), vecmath.floats(query)))


@dataclass
class StoreOps:
    """The store's operations on its ``keys``, as generators yielding ``Cmds`` / ``Call``."""

    keys: Keys
    scan_limit: int
    loader: Callable[[Any], dict[str, Any]] | None
    distance: str = "cosine"

    def setup(self, dims: int | None) -> RedisOp:
        """Check the layout version (and the vectors' dims) in ``{S}:meta``, recording them when new."""
        k = self.keys
        cmds = Cmds().add("hsetnx", k.meta, "version", LAYOUT_VERSION).add("hget", k.meta, "version")
        if dims is not None:
            cmds.add("hsetnx", k.meta, "dims", dims).add("hget", k.meta, "dims")
        reply = yield cmds
        version = _s(reply[1])
        if version != str(LAYOUT_VERSION):
            raise SchemaError(
                f"Redis store {k.base}: layout version {version} is not this threadline's ({LAYOUT_VERSION}); "
                "upgrade threadline, or use another store_prefix"
            )
        if dims is not None and _s(reply[3]) != str(dims):
            raise ValueError(f"Redis store {k.base} holds vectors of {_s(reply[3])} dimensions; index['dims'] is {dims}: make them agree")

    def sweep(self, now_us: int, page: int = SWEEP_PAGE) -> RedisOp:
        """Drop from the index the items whose TTL ended (Redis deleted them); returns how many."""
        k = self.keys
        total = 0
        while True:
            (due,) = yield Cmds().add("zrangebyscore", k.expiry, "-inf", now_us, start=0, num=page)
            if not due:
                return total
            keys, args = [k.registry, k.expiry], []
            for m in due:
                ns, key = json.loads(_s(m))
                keys += [k.item(ns, key), k.vectors(ns, key), k.ns(ns)]
                args += [_s(m), ns, key]
            purged = yield Call("purge", keys, args)
            total += int(purged)
            if len(due) < page or not purged:
                return total

    def batch(self, p: O.Plan, vec: O.Vectors, now_us: int) -> RedisOp:
        """Run a checked plan: reads, then the writes in one script. Returns the results in op
        order and the (ns, key) of items read with ``refresh_ttl`` that have a TTL."""
        results: list[Any] = [None] * p.size
        refresh: list[tuple[str, str]] = []
        if p.searches or p.lists:
            yield from self.sweep(now_us)
        if p.gets:
            rows = yield from self._rows([(V.ns_text(op.namespace), op.key) for _, op in p.gets], vectors=False)
            for (i, op), (row, _) in zip(p.gets, rows):
                if row is not None:
                    results[i] = V.item(op.namespace, row.key, row.value, row.created, row.updated, None)
                    if op.refresh_ttl and row.ttl is not None:
                        refresh.append((row.ns, row.key))
        for n, (i, op) in enumerate(p.searches):
            found = yield from self._search(op, vec.queries.get(n))
            results[i] = [_search_item(row, score) for row, score in found]
            if op.refresh_ttl:
                refresh += [(row.ns, row.key) for row, _ in found if row.ttl is not None]
        for i, op in p.lists:
            results[i] = yield from self._list_namespaces(op)
        if p.puts:
            yield self._write(p, vec)
        return results, refresh

    def refresh(self, items: list[tuple[str, str]]) -> RedisOp:
        """Restart the TTL of ``items`` ((ns, key) pairs) from now."""
        k = self.keys
        pairs = sorted(set(items))
        keys = [k.expiry] + [name for ns, key in pairs for name in (k.item(ns, key), k.vectors(ns, key))]
        yield Call("refresh", keys, [member(ns, key) for ns, key in pairs])

    # reads

    def _rows(self, items: list[tuple[str, str]], *, vectors: bool) -> RedisOp:
        """[(Row or None, {field: vector bytes})] for ``items`` ((ns, key) pairs), in order."""
        k = self.keys
        cmds = Cmds()
        for ns, key in items:
            cmds.add("hmget", k.item(ns, key), list(FIELDS))
            if vectors:
                cmds.add("hgetall", k.vectors(ns, key))
        reply = yield cmds
        step = 2 if vectors else 1
        out = []
        for n, (ns, key) in enumerate(items):
            row = _row(k, ns, key, reply[n * step], self.loader)
            vecs = _vectors(k.vectors(ns, key), reply[n * step + 1]) if vectors else {}
            out.append((row, vecs))
        return out

    def _namespaces(self, prefix: tuple[str, ...]) -> RedisOp:
        """The namespaces at or under ``prefix`` (whole labels), in byte order."""
        if not prefix:
            (names,) = yield Cmds().add("zrangebylex", self.keys.registry, "-", "+")
            return [_s(n) for n in names]
        text = V.ns_text(prefix)
        (names,) = yield Cmds().add("zrangebylex", self.keys.registry, f"[{text}", f"({text}/")
        return [n for n in map(_s, names) if n == text or n.startswith(text + V.SEP)]

    def _search(self, op: SearchOp, query: list[float] | None) -> RedisOp:
        """[(Row, score)] of one search, ordered and paged as the SQL stores order them."""
        namespaces = yield from self._namespaces(tuple(op.namespace_prefix))
        cmds = Cmds()
        for ns in namespaces:
            cmds.add("zrange", self.keys.ns(ns), 0, -1, withscores=True)
        reply = (yield cmds) if namespaces else []
        entries = [(-score, ns, _s(key)) for ns, members in zip(namespaces, reply) for key, score in members]
        entries.sort()
        end = op.offset + op.limit
        if not op.filter and query is None:  # the index orders them: read only the page
            page: list[tuple[Row, float | None]] = []
            live = 0
            start = 0
            while live < end and start < len(entries):
                chunk = entries[start : start + end - live]
                start += len(chunk)
                for row, _ in (yield from self._rows([(ns, key) for _, ns, key in chunk], vectors=False)):
                    if row is not None:
                        live += 1
                        if live > op.offset and len(page) < op.limit:
                            page.append((row, None))
            return page
        if len(entries) > self.scan_limit:
            raise ScanLimitError(
                f"search of {op.namespace_prefix!r} with a filter or query would read {len(entries)} items, more than "
                f"this store's scan_limit of {self.scan_limit}: narrow the namespace prefix, or raise scan_limit"
            )
        match = compile_filter(op.filter)
        rows = yield from self._rows([(ns, key) for _, ns, key in entries], vectors=query is not None)
        kept = [(row, vecs) for row, vecs in rows if row is not None and match(row.value)]
        if query is None:
            return [(row, None) for row, _ in kept[op.offset : end]]
        q = vecmath.pack(query)
        scored = []
        for row, vecs in kept:
            if vecs:
                scores = [s for s in (_similarity(self.distance, q, v) for v in vecs.values()) if s is not None]
                scored.append((row, max(scores) if scores else None))
        scored.sort(key=lambda rs: (rs[1] is None, -(rs[1] or 0.0), rs[0].ns, rs[0].key))
        return scored[op.offset : end]

    def _list_namespaces(self, op: ListNamespacesOp) -> RedisOp:
        conditions = []
        lead: tuple[str, ...] = ()
        for cond in op.match_conditions or ():
            path = tuple(cond.path)
            if cond.match_type not in ("prefix", "suffix"):
                raise ValueError(f"unknown match_type {cond.match_type!r} in list_namespaces; use 'prefix' or 'suffix'")
            if path:
                conditions.append(O._pattern(path, cond.match_type))
                if cond.match_type == "prefix":
                    lead = path[: path.index("*")] if "*" in path else path
        names = yield from self._namespaces(lead)
        names = [n for n in names if all(O.ns_match(n, pattern) for pattern in conditions)]
        if op.max_depth is not None:
            names = sorted({V.SEP.join(V.ns_tuple(n)[: op.max_depth]) for n in names})
        return [V.ns_tuple(n) for n in names[op.offset : op.offset + op.limit]]

    # writes

    def _write(self, p: O.Plan, vec: O.Vectors) -> Call:
        k = self.keys
        vectors: dict[tuple[str, str], list[str]] = defaultdict(list)
        for (ns, key, name, _), v in zip(p.put_texts, vec.puts):
            vectors[(ns, key)] += [name, base64.b64encode(vecmath.pack(v)).decode()]
        keys, args = [k.registry, k.expiry], [len(p.puts)]
        for (ns, key), (op, encoded) in p.puts.items():
            keys += [k.item(ns, key), k.vectors(ns, key), k.ns(ns)]
            if encoded is None:
                args += ["del", member(ns, key), ns, key]
            else:
                fields = vectors.get((ns, key), [])
                ttl = "" if op.ttl is None else repr(float(op.ttl))
                args += ["put", member(ns, key), ns, key, encoded, ttl, len(fields) // 2, *fields]
        return Call("write", keys, args)


# --- running them -----------------------------------------------------------------------


def _reply_error(cmds: Cmds, reply: list[Any], url: str | None) -> None:
    for (method, args, _), result in zip(cmds.commands, reply):
        if isinstance(result, Exception):
            raise redisconn.door_error(type(result)(f"{result} (key {args[0]}, {method.upper()})"), url) from result


def _now_us() -> int:
    return int(time.time() * 1e6)


def _pipeline(client: Any, step: Cmds) -> Any:
    """``step``'s commands queued on a non-transactional pipeline of ``client`` (sync or async)."""
    pipe = client.pipeline(transaction=False)
    for method, args, kwargs in step.commands:
        getattr(pipe, method)(*args, **kwargs)
    return pipe


def _script(step: Call) -> tuple[Any, ...]:
    """EVALSHA's arguments after the script: key count, keys, arguments."""
    return (len(step.keys), *step.keys, *step.args)


def run(client: Any, op: RedisOp, url: str | None) -> Any:
    """Drive ``op`` on a sync client; redis-py errors become one-line BackendErrors."""
    reply: Any = None
    with redisconn.at_door(url):
        try:
            while True:
                step = op.send(reply)
                if isinstance(step, Cmds):
                    reply = _pipeline(client, step).execute(raise_on_error=False)
                    _reply_error(step, reply, url)
                else:
                    try:
                        reply = client.evalsha(SHAS[step.name], *_script(step))
                    except rex.NoScriptError:  # not cached on that server yet
                        reply = client.eval(SCRIPTS[step.name], *_script(step))
        except StopIteration as stop:
            return stop.value


async def arun(client: Any, op: RedisOp, url: str | None) -> Any:
    """``run`` on a ``redis.asyncio`` client."""
    reply: Any = None
    async with redisconn.aat_door(url):
        try:
            while True:
                step = op.send(reply)
                if isinstance(step, Cmds):
                    reply = await _pipeline(client, step).execute(raise_on_error=False)
                    _reply_error(step, reply, url)
                else:
                    try:
                        reply = await client.evalsha(SHAS[step.name], *_script(step))
                    except rex.NoScriptError:
                        reply = await client.eval(SCRIPTS[step.name], *_script(step))
        except StopIteration as stop:
            return stop.value


# --- the stores ----------------------------------------------------------------------------


class _RedisCore:
    """What both Redis stores add to the SQL stores' shared core."""

    _ops: StoreOps
    _url: str | None

    def _init_redis(
        self,
        index: IndexConfig | None,
        ttl: TTLConfig | None,
        deserializer: Callable[[Any], dict[str, Any]] | None,
        store_prefix: str,
        vector_prefix: str,
        scan_limit: int,
        cluster_mode: bool | None,
    ) -> None:
        if cluster_mode is not None and not isinstance(cluster_mode, bool):
            raise TypeError("cluster_mode must be a boolean or None")
        if isinstance(scan_limit, bool) or not isinstance(scan_limit, int) or scan_limit < 1:
            raise ValueError(f"scan_limit must be a positive integer (items), got {scan_limit!r}")
        self._init_core(index, ttl, deserializer)  # type: ignore[attr-defined]
        self.cluster_mode = cluster_mode  # accepted as the official stores do; the key layout serves both
        self.store_prefix, self.vector_prefix = store_prefix, vector_prefix
        self.scan_limit = scan_limit
        keys = Keys(store_prefix, vector_prefix)
        index_ = self._index  # type: ignore[attr-defined]
        self._ops = StoreOps(keys, scan_limit, deserializer, index_.distance if index_ else "cosine")

    def _dims(self) -> int | None:
        return self._index.dims if self._index else None  # type: ignore[attr-defined]


class RedisStore(_RedisCore, SyncStore):
    """LangGraph ``BaseStore`` on Redis 7 or Redis Cluster through redis-py (sync), no modules needed.

    Usage::

        with RedisStore.from_conn_string("redis://localhost:6379/0") as store:
            store.setup()  # optional: the first operation checks the server
            store.put(("users", "123"), "prefs", {"theme": "dark"})
            graph = builder.compile(checkpointer=saver, store=store)

    ``conn``: a ``redis.Redis`` or ``redis.cluster.RedisCluster``. ``index``, ``ttl`` as the
    other stores (TTL by Redis's own expiry, minutes); ``store_prefix`` / ``vector_prefix``
    name the keys (module docstring); ``scan_limit``: the most items a filtered or semantic
    search reads (ScanLimitError beyond). ``cluster_mode`` is accepted and not needed.

    Raises BackendError naming the problem and the fix when Redis is down, refuses the login,
    replies WRONGTYPE (a foreign key under the prefix) or OOM; CorruptRowError for an item
    hash this store did not write; SchemaError for a layout of a newer threadline.
    """

    def __init__(
        self,
        conn: redis.Redis | redis.cluster.RedisCluster,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        cluster_mode: bool | None = None,
        store_prefix: str = STORE_PREFIX,
        vector_prefix: str = VECTOR_PREFIX,
        scan_limit: int = SCAN_LIMIT,
        deserializer: Callable[[Any], dict[str, Any]] | None = None,
    ) -> None:
        super().__init__()
        self._redis = conn
        self._url: str | None = None
        self._init_redis(index, ttl, deserializer, store_prefix, vector_prefix, scan_limit, cluster_mode)

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        store_prefix: str = STORE_PREFIX,
        vector_prefix: str = VECTOR_PREFIX,
        connection_args: dict[str, Any] | None = None,
        scan_limit: int = SCAN_LIMIT,
    ) -> Iterator[RedisStore]:
        """Connect to ``conn_string`` (``redis://``, ``rediss://``, ``redis+cluster://``,
        ``rediss+cluster://``; see ``threadline.backends.redisconn``), closed on exit."""
        client = redisconn.connect(conn_string, **(connection_args or {}))
        store_prefix = redisconn.prefix_for(conn_string, store_prefix, STORE_PREFIX, "store")
        store = None
        try:
            store = cls(client, index=index, ttl=ttl, store_prefix=store_prefix, vector_prefix=vector_prefix, scan_limit=scan_limit)
            store._url = conn_string
            yield store
        finally:
            if store is not None:
                store.stop_ttl_sweeper()
            client.close()

    def _run(self, op: RedisOp) -> Any:
        return run(self._redis, op, self._url)

    def setup(self) -> None:
        """Check the server (PING) and the store's layout record; log the server's safety warnings."""
        self._run(self._ops.setup(self._dims()))
        for line in redisconn.setup_warnings(self._redis, self._url):
            logger.warning(line)
        self.is_setup = True

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        p = O.plan(ops, self._index)
        vec = self._embed(p)
        if not self.is_setup:
            self.setup()
        results, refresh = self._run(self._ops.batch(p, vec, _now_us()))
        if refresh:
            self._run(self._ops.refresh(refresh))
        return results

    def sweep_ttl(self) -> int:
        """Drop from the index the items Redis expired; returns how many. (Redis deletes the
        items itself; searches and namespace listings sweep first.)"""
        if not self.is_setup:
            self.setup()
        return self._run(self._ops.sweep(_now_us()))


class AsyncRedisStore(_RedisCore, AsyncStore):
    """LangGraph ``BaseStore`` on Redis 7 or Redis Cluster through ``redis.asyncio``; ``setup`` is ``async``.

    Usage::

        async with AsyncRedisStore.from_conn_string("redis://localhost:6379/0") as store:
            await store.aput(("users", "123"), "prefs", {"theme": "dark"})

    ``AsyncRedisStore(redis_url, connection_args=…)`` opens its own client (checked at
    ``setup``, closed by ``aclose`` / ``async with``); ``redis_client=`` uses yours. Other
    keywords and errors as ``RedisStore``.
    """

    def __init__(
        self,
        redis_url: str | None = None,
        *,
        redis_client: redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster | None = None,
        index: IndexConfig | None = None,
        connection_args: dict[str, Any] | None = None,
        ttl: TTLConfig | None = None,
        cluster_mode: bool | None = None,
        store_prefix: str = STORE_PREFIX,
        vector_prefix: str = VECTOR_PREFIX,
        scan_limit: int = SCAN_LIMIT,
        deserializer: Callable[[Any], dict[str, Any]] | None = None,
    ) -> None:
        if redis_url is None and redis_client is None:
            raise ValueError("Either redis_url or redis_client must be provided")
        client = redis_client if redis_client is not None else redisconn.async_client(redis_url, **(connection_args or {}))
        super().__init__()
        self.loop = self._loop
        self._url = redis_url
        self._owns_client = redis_client is None
        self._redis = client
        self._door_checked = not self._owns_client
        self._init_redis(index, ttl, deserializer, store_prefix, vector_prefix, scan_limit, cluster_mode)

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls,
        conn_string: str,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        store_prefix: str = STORE_PREFIX,
        vector_prefix: str = VECTOR_PREFIX,
        connection_args: dict[str, Any] | None = None,
        scan_limit: int = SCAN_LIMIT,
    ) -> AsyncIterator[AsyncRedisStore]:
        """Async ``RedisStore.from_conn_string``."""
        client = await redisconn.aconnect(conn_string, **(connection_args or {}))
        store_prefix = redisconn.prefix_for(conn_string, store_prefix, STORE_PREFIX, "store")
        store = None
        try:
            store = cls(
                redis_client=client, index=index, ttl=ttl, store_prefix=store_prefix, vector_prefix=vector_prefix, scan_limit=scan_limit
            )
            store._url = conn_string
            yield store
        finally:
            if store is not None:
                await store.stop_ttl_sweeper()
            await client.aclose()

    async def _run(self, op: RedisOp) -> Any:
        return await arun(self._redis, op, self._url)

    async def setup(self) -> None:
        """Check the server (PING; the URL's form against it) and the store's layout record; log
        the server's safety warnings."""
        if not self._door_checked:
            await redisconn.acheck(self._redis, self._url)
            self._door_checked = True
        await self._run(self._ops.setup(self._dims()))
        for line in await redisconn.asetup_warnings(self._redis, self._url):
            logger.warning(line)
        self.is_setup = True

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        p = O.plan(ops, self._index)
        vec = await self._aembed(p)
        if not self.is_setup:
            await self.setup()
        results, refresh = await self._run(self._ops.batch(p, vec, _now_us()))
        if refresh:
            await self._run(self._ops.refresh(refresh))
        return results

    async def sweep_ttl(self) -> int:
        """Drop from the index the items Redis expired; returns how many."""
        if not self.is_setup:
            await self.setup()
        return await self._run(self._ops.sweep(_now_us()))

    async def aclose(self) -> None:
        """Stop the TTL sweeper and close the client this store opened (not one passed in)."""
        await self.stop_ttl_sweeper()
        if self._owns_client:
            await self._redis.aclose()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


__all__ = ["SCAN_LIMIT", "AsyncRedisStore", "RedisStore", "ScanLimitError"]
