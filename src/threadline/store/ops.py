"""Store operations, written once as sans-IO generators (see ``threadline.storage.runner``).

``plan`` checks and encodes a batch before any SQL runs (so bad input stores
nothing); ``batch`` runs it in one transaction: reads first (get, search,
list_namespaces), then writes (put, delete), as the official stores order them.
Reads whose TTL should be refreshed come back as keys for ``refresh``, which the
store runs as a separate write, so plain reads never take SQLite's write lock.
``sweep`` deletes one page of expired items.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from langgraph.store.base import GetOp, InvalidNamespaceError, ListNamespacesOp, Op, PutOp, SearchOp, validate_op_namespace

from threadline.storage.ops import Op as SqlOp
from threadline.storage.ops import Q, chunks
from threadline.store import checks
from threadline.store import values as V
from threadline.store.index import Index
from threadline.storage.dialect.store import StoreSql

SWEEP_PAGE = 1000


@dataclass
class Plan:
    """A checked batch: ops by kind with their result index, puts deduplicated (last wins)."""

    size: int
    gets: list[tuple[int, GetOp]] = field(default_factory=list)
    searches: list[tuple[int, SearchOp]] = field(default_factory=list)
    lists: list[tuple[int, ListNamespacesOp]] = field(default_factory=list)
    puts: dict[tuple[str, str], tuple[PutOp, str | None]] = field(default_factory=dict)  # → (op, JSON)
    put_texts: list[tuple[str, str, str, str]] = field(default_factory=list)  # (prefix, key, field, text)
    query_texts: list[tuple[int, str]] = field(default_factory=list)  # (index in searches, query)

    @property
    def writes(self) -> bool:
        return bool(self.puts)


def plan(ops: Iterable[Op], index: Index | None) -> Plan:
    """Validate and encode ``ops``. Raises InvalidNamespaceError or ValueError (a threadline
    error for a limit, ``checks``) naming the bad namespace, key, value, TTL, filter or page,
    before anything is stored."""
    p = Plan(size=0)
    for i, op in enumerate(ops):
        p.size += 1
        validate_op_namespace(op)
        checks.op(op)
        if isinstance(op, GetOp):
            p.gets.append((i, op))
        elif isinstance(op, SearchOp):
            if op.query and index is not None:
                p.query_texts.append((len(p.searches), op.query))
            p.searches.append((i, op))
        elif isinstance(op, ListNamespacesOp):
            p.lists.append((i, op))
        elif isinstance(op, PutOp):
            if not op.namespace:
                raise InvalidNamespaceError("Namespace cannot be empty.")
            where = f"value of {op.namespace!r}/{op.key!r}"
            if op.value is not None and not isinstance(op.value, dict):
                raise ValueError(f"{where} must be a dict, got {type(op.value).__name__}")
            encoded = None if op.value is None else checks.value(op.value, where)
            p.puts[(V.ns_text(op.namespace), op.key)] = (op, encoded)
        else:
            raise ValueError(f"unknown store operation {type(op).__name__}")
    if index is not None:
        for (prefix, key), (op, encoded) in p.puts.items():
            if encoded is not None and op.index is not False:
                texts = index.texts(op.value, None if op.index is None else list(op.index))
                p.put_texts += [(prefix, key, name, text) for name, text in texts]
    return p


@dataclass
class Vectors:
    """What the embedder returned for a plan, and how the store scores."""

    queries: dict[int, list[float]]  # index in Plan.searches → query vector
    puts: list[list[float]]  # aligned with Plan.put_texts
    distance: str = "cosine"
    vector_type: str = "vector"


def batch(
    d: StoreSql, p: Plan, vec: Vectors, now: float, *, omit_expired: bool, has_vectors: bool, loader: Any
) -> SqlOp[tuple[list[Any], list[tuple[str, str]]]]:
    """Run a plan; returns the results in op order and the (prefix, key) of items read
    with ``refresh_ttl`` that have a TTL."""
    results: list[Any] = [None] * p.size
    refresh: list[tuple[str, str]] = []
    live = omit_expired  # the statements leave expired items out, ``now`` their parameter
    live_params = [now] if live else []
    by_ns: dict[tuple[str, ...], list[tuple[int, GetOp]]] = defaultdict(list)
    for i, op in p.gets:
        by_ns[op.namespace].append((i, op))
    for namespace, ops in by_ns.items():
        prefix, rows = V.ns_text(namespace), {}
        for keys in chunks(sorted({op.key for _, op in ops}), d.max_params - 2):
            rows.update((r[0], r) for r in (yield Q(d.get_items(len(keys), live), (prefix, *keys, *live_params))))
        for i, op in ops:
            row = rows.get(op.key)
            if row is not None:
                results[i] = V.item(namespace, row[0], row[1], row[2], row[3], loader)
                if op.refresh_ttl and row[4] is not None:
                    refresh.append((prefix, op.key))
    for n, (i, op) in enumerate(p.searches):
        rows = yield Q(*_search_sql(d, op, vec.queries.get(n), vec, live, live_params))
        results[i] = [V.search_item(r[0], r[1], r[2], r[3], r[4], r[6], loader) for r in rows]
        if op.refresh_ttl:
            refresh += [(r[0], r[1]) for r in rows if r[5] is not None]
    for i, op in p.lists:
        results[i] = yield from _list_namespaces(d, op, live, live_params)
    if p.puts:
        yield from _write(d, p, vec, now, has_vectors)
    return results, refresh


def _search_sql(
    d: StoreSql, op: SearchOp, query: list[float] | None, vec: Vectors, live: bool, live_params: list[Any]
) -> tuple[str, list[Any]]:
    where, params = d.search_where(op.filter, V.ns_text(tuple(op.namespace_prefix)) if op.namespace_prefix else None)
    if query is None:
        return d.search(where, live), [*params, *live_params, op.limit, op.offset]
    score, score_params = d.score(vec.distance, query, vec.vector_type)
    return d.search(where, live, score), [*score_params, *params, *live_params, op.limit, op.offset]


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def ns_match(prefix: str | None, pattern: str) -> int:
    """The SQLite function ``threadline_ns_match(prefix, pattern)``: 1 where the regex matches."""
    return int(prefix is not None and _compiled(pattern).search(prefix) is not None)


def _pattern(path: tuple[str, ...], kind: str) -> str:
    """A regex matching whole labels of the dot-joined namespace; ``*`` is exactly one label."""
    body = r"\.".join("[^.]+" if label == "*" else re.escape(label) for label in path)
    return rf"(^|\.){body}\Z" if kind == "suffix" else rf"^{body}(\.|\Z)"


def _list_namespaces(d: StoreSql, op: ListNamespacesOp, live: bool, live_params: list[Any]) -> SqlOp[list[tuple[str, ...]]]:
    terms: list[tuple[str, str]] = []  # (kind, argument) of ``StoreSql.namespaces_where``
    for cond in op.match_conditions or ():
        path = tuple(cond.path)
        if cond.match_type not in ("prefix", "suffix"):
            raise ValueError(f"unknown match_type {cond.match_type!r} in list_namespaces; use 'prefix' or 'suffix'")
        if not path:
            continue
        literal = path if cond.match_type == "prefix" and "*" not in path else ()
        lead = path[: path.index("*")] if cond.match_type == "prefix" and "*" in path else literal
        if lead:  # the labels before any wildcard narrow the scan to a key range
            terms.append(("range", V.ns_text(lead)))
        if not literal:
            terms.append(("match", _pattern(path, cond.match_type)))
    where, params = d.namespaces_where(terms)
    if op.max_depth is None:
        rows = yield Q(d.list_namespaces(where, live, paged=True), (*params, *live_params, op.limit, op.offset))
        return [V.ns_tuple(r[0]) for r in rows]
    rows = yield Q(d.list_namespaces(where, live, paged=False), (*params, *live_params))
    truncated = sorted({V.SEP.join(V.ns_tuple(r[0])[: op.max_depth]) for r in rows})
    return [V.ns_tuple(t) for t in truncated[op.offset : op.offset + op.limit]]


def _write(d: StoreSql, p: Plan, vec: Vectors, now: float, has_vectors: bool) -> SqlOp[None]:
    deletes = [key for key, (_, encoded) in p.puts.items() if encoded is None]
    upserts = []
    for (prefix, key), (op, encoded) in p.puts.items():
        if encoded is not None:
            expires = None if op.ttl is None else now + float(op.ttl) * 60
            upserts.append((prefix, key, encoded, now, now, expires, None if op.ttl is None else float(op.ttl)))
    if deletes:
        yield Q(d.DELETE_ITEM, deletes, many=True)
    if upserts:
        yield Q(d.UPSERT_ITEM, upserts, many=True)
    if has_vectors:  # an item's vectors are replaced whole: none stay from an earlier put
        yield Q(d.DELETE_VECTORS, list(p.puts), many=True)
    if p.put_texts:
        rows = [(prefix, key, name, d.vector_param(v)) for (prefix, key, name, _), v in zip(p.put_texts, vec.puts)]
        yield Q(d.INSERT_VECTOR, rows, many=True)


def refresh(d: StoreSql, keys: list[tuple[str, str]], now: float, *, omit_expired: bool) -> SqlOp[None]:
    """Restart the TTL of the items read (``expires_at = now + ttl_minutes``); with
    ``omit_expired`` an already expired item is left to the sweeper."""
    rows = [(now, prefix, key, *([now] if omit_expired else [])) for prefix, key in sorted(set(keys))]
    yield Q(d.refresh_ttl(omit_expired), rows, many=True)


def sweep(d: StoreSql, now: float, has_vectors: bool, page: int = SWEEP_PAGE) -> SqlOp[int]:
    """Delete up to ``page`` items expired before ``now`` (and their vectors); returns how many.

    Safe with many sweepers at once: on Postgres each takes rows the others have not
    locked (``StoreSql.EXPIRED_ITEMS`` skips locked rows); on SQLite the write transaction
    serializes them."""
    rows = yield Q(d.EXPIRED_ITEMS, (now, page))
    keys = [(r[0], r[1]) for r in rows]
    if keys:
        yield Q(d.DELETE_ITEM, keys, many=True)
        if has_vectors:
            yield Q(d.DELETE_VECTORS, keys, many=True)
    return len(keys)
