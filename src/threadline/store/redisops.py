"""The Redis store's operations, as sans-IO generators (``StoreOps``): each yields ``Cmds`` (one
pipelined round trip) or a ``Call`` of a script of ``storage/redis/store.py`` and is sent the
replies; ``store.redis`` runs them on a sync or an async client. The batch is the SQL stores'
plan (``store.ops.plan``); searches with a filter or a query read the namespace prefix's items
and decide in Python (``store.pyfilter``, vectors scored exactly).
"""

from __future__ import annotations

import base64
import json
from collections import defaultdict
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from langgraph.store.base import ListNamespacesOp, SearchItem, SearchOp

from threadline.errors import CorruptRowError, SchemaError, ThreadlineError
from threadline.storage import vecmath
from threadline.storage.redis.store import LAYOUT_VERSION, Keys, member
from threadline.store import ops as O
from threadline.store import values as V
from threadline.store.pyfilter import compile_filter

SWEEP_PAGE = 1000


class ScanLimitError(ThreadlineError, ValueError):
    """A filtered or semantic search would read more items than the store's ``scan_limit``."""


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

