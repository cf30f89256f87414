"""Cache operations as sans-IO generators (run by ``threadline.store.drivers``).

A namespace is stored as its JSON array text, so any label (commas, dots) keeps its
identity; every namespace, key and value is a bound parameter.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from threadline.storage.ops import Op, Q, chunks
from threadline.storage.dialect.store import StoreSql

Row = tuple[str, str, str, bytes]  # (ns, key, encoding, value)


def ns_text(namespace: Sequence[str]) -> str:
    return json.dumps(list(namespace), ensure_ascii=False, separators=(",", ":"))


def ns_tuple(text: str) -> tuple[str, ...]:
    return tuple(json.loads(text))


def get(d: StoreSql, keys: Sequence[tuple[str, str]], now: float) -> Op[list[Row]]:
    """The live entries among ``keys`` ((ns text, key) pairs): expired ones are not returned."""
    by_ns: dict[str, list[str]] = defaultdict(list)
    for ns, key in keys:
        by_ns[ns].append(key)
    rows: list[Row] = []
    for ns, names in by_ns.items():
        for part in chunks(sorted(set(names)), d.max_params - 2):
            rows += yield Q(d.cache_entries(len(part)), (ns, *part, now))
    return rows


def put(d: StoreSql, rows: Sequence[tuple[str, str, str, bytes, float, float | None]], now: float) -> Op[None]:
    """Upsert (ns, key, encoding, value, created_at, expires_at) rows; expired entries are
    deleted in the same transaction, so the table does not keep what no get returns."""
    yield Q(d.DELETE_EXPIRED_ENTRIES, (now,))
    yield Q(d.PUT_ENTRY, list(rows), many=True)


def clear(d: StoreSql, namespaces: Sequence[str] | None) -> Op[None]:
    """Delete the entries of ``namespaces`` (ns texts), or every entry for None."""
    if namespaces is None:
        yield Q(d.CLEAR_ENTRIES)
    else:
        yield Q(d.CLEAR_NAMESPACE, [(ns,) for ns in namespaces], many=True)
