"""A thread's rows, table by table, as stored: read, written and checked — the operations
backups, restores, bundles, imports and the cold tier copy threads with (values stay encoded,
never decoded, except where a restore verifies what it wrote by loading it).

``THREAD_TABLES`` (the tables a thread's rows live in, in the order they are inserted), ``Rows``
(table → (columns, rows)), ``columns_op``, ``thread_ids_op``, ``thread_rows_op``, ``read_op``,
``store_thread_op`` (insert one thread's rows and check they read back, and load, exactly:
``Expected``, ``Differs``) and ``loaded_op``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from threadline import codec
from threadline.codec.jsontext import compact_doc, expand_doc
from threadline.errors import ConfigError, CorruptRowError
from threadline.storage import ops
from threadline.storage.dialect import Dialect, dumps_json
from threadline.storage.ops import Op, Q

# The tables a thread's rows live in, in the order they are inserted.
THREAD_TABLES = ("threads", "checkpoints", "blobs", "writes", "adopted", "thread_records")
Rows = dict[str, tuple[list[str], list[tuple]]]  # table → (columns, rows)
Sink = Callable[[str, Rows], None]  # (thread_id, its rows)
Transform = Callable[[Dialect, str, Rows], Op[Rows]]  # (source dialect, thread_id, its rows) → rows to write
def _plain(value: Any) -> Any:
    """A value as any backend's driver takes it back: JSON documents as text, bytes as bytes."""
    if isinstance(value, (dict, list)):
        return dumps_json(value, sort_keys=False)
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def columns_op(d: Dialect) -> Op[dict[str, list[str]]]:
    """table → its column names, for the ``THREAD_TABLES`` the database has."""
    out: dict[str, list[str]] = {}
    for t in THREAD_TABLES:
        cols = [r[0] for r in (yield Q(d.columns_sql, (f"threadline_{t}",)))]
        if cols:
            out[t] = sorted(cols)
    return out


def thread_ids_op(d: Dialect, tables: Iterable[str]) -> Op[list[str]]:
    """Every thread_id with a row in any of ``tables``, in order."""
    return [r[0] for r in (yield Q(d.thread_ids_in(tuple(tables))))]


def thread_rows_op(d: Dialect, thread_id: str, columns: Mapping[str, Sequence[str]]) -> Op[Rows]:
    """Every row of ``thread_id`` in each table of ``columns``, values as stored but a checkpoint's
    document, as written (a compacted one expanded: ``jsontext.expand_doc``, which any backend takes)."""
    out: Rows = {}
    for t, cols in columns.items():
        found = yield Q(d.thread_table_rows(t, tuple(cols)), (thread_id,))
        rows = [tuple(_plain(v) for v in r) for r in found]
        out[t] = (list(cols), _with_docs(t, cols, rows, expand_doc))
    return out


def _with_docs(table: str, cols: Sequence[str], rows: list[tuple], text: Callable[[str], str]) -> list[tuple]:
    """``rows`` of ``table`` with ``text`` applied to each checkpoint document held as text (other tables as they are)."""
    if table != "checkpoints" or "checkpoint" not in cols:
        return rows
    at = list(cols).index("checkpoint")
    return [(*r[:at], text(r[at]) if isinstance(r[at], str) else r[at], *r[at + 1 :]) for r in rows]


def read_op(d: Dialect, thread_ids: Sequence[str] | None, sink: Sink, transform: Transform | None = None) -> Op[int]:
    """Hand every (or each named) thread's rows to ``sink``, all read in this one transaction
    (``d.snapshot_sql`` makes it one snapshot where statements see commits otherwise), each
    rewritten by ``transform`` first when given (in the same transaction). Threads read."""
    if d.snapshot_sql:
        yield Q(d.snapshot_sql)
    columns = yield from columns_op(d)
    ids = list(thread_ids) if thread_ids is not None else (yield from thread_ids_op(d, columns))
    for tid in ids:
        rows = yield from thread_rows_op(d, tid, columns)
        sink(tid, (yield from transform(d, tid, rows)) if transform else rows)
    return len(ids)


def comparable_rows(rows: list[tuple]) -> list[tuple]:
    """Rows as compared across backends, sorted: a JSON document in its canonical text (Postgres
    JSONB keeps no key order), a float and an equal int alike."""

    def norm(v: Any) -> Any:
        if isinstance(v, (str, dict, list)) and (not isinstance(v, str) or v[:1] in "{["):
            try:
                return dumps_json(json.loads(expand_doc(v)) if isinstance(v, str) else v)
            except ValueError:
                return v
        return float(v) if isinstance(v, int) and not isinstance(v, bool) else v

    return sorted((tuple(norm(v) for v in r) for r in rows), key=repr)


@dataclass
class Expected:
    """What a restored thread must load as: its checkpoints loaded from the archive
    (``loaded_op``) with ``serde`` and ``bc``, which load the restored rows too."""

    serde: Any
    bc: Any
    loaded: dict[tuple[str, str], Any]


def store_thread_op(
    d: Dialect, thread_id: str, rows: Rows, columns: Mapping[str, Sequence[str]], *, replace: bool, bc: Any = None,
    expected: Expected | None = None, tags: bool = True,
) -> Op[None]:
    """Insert one thread's rows (the columns both sides have) in one transaction and read them
    back; with ``expected``, also load every checkpoint and compare. Raises ``Differs``
    (rolling it all back; where the backend has no transaction, ``rolls_back``, deleting the
    thread's rows) unless they read back and load exactly. Raises ConfigError when
    the thread exists and not ``replace``. ``tags`` False keeps the thread's tags and pin in
    the target (a cold thread restored: ``lifecycle.cold``)."""
    exists = yield Q(d.HAS_CHECKPOINTS, (thread_id,))
    if exists and not replace:
        raise ConfigError(f"thread {thread_id!r} already exists in the target; pass replace=True to overwrite it",
                          flags={"replace=True": "--replace"})
    yield from ops.delete_thread(d, thread_id, bc, tags=tags)
    yield Q(d.DELETE_ADOPTED, (thread_id,))
    wanted: Rows = {}
    for t in THREAD_TABLES:
        if t not in rows or t not in columns:
            continue
        cols, values = rows[t]
        keep = [i for i, c in enumerate(cols) if c in columns[t]]
        shared = [cols[i] for i in keep]
        data = [tuple(r[i] for i in keep) for r in values]
        if t == "checkpoints" and not d.keeps_json_text:
            data = _canonical_checksums(shared, data)
        wanted[t] = (shared, data)
        if data:
            # stored as the backend's puts store documents (compacted on SQLite), read back expanded
            yield Q(d.insert_table_rows(t, tuple(shared)), _with_docs(t, shared, data, compact_doc) if d.compacts_docs else data, many=True)
    try:
        yield from _check_stored_op(d, thread_id, wanted, expected)
    except Differs:
        if not d.rolls_back:  # no transaction to undo the rows written: they go again
            yield from ops.delete_thread(d, thread_id, bc, tags=tags)
        raise


def _canonical_checksums(cols: Sequence[str], data: list[tuple]) -> list[tuple]:
    """Checkpoint rows whose ``x3:`` checksum covers their JSON text as a backend that keeps it wrote
    it (``codec.seal``), for a backend that does not (Postgres's JSONB): each checked against its
    text, then given a checksum of its parsed JSON (``c3:``, or the canonical ``b2:``), which reads
    back the same from any backend.
    ``Differs`` for a row whose checksum does not match (a damaged row is never re-sealed)."""
    at = {c: i for i, c in enumerate(cols)}
    if not {"thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "checkpoint", "metadata", "checksum"} <= at.keys():
        return data
    out = []
    for r in data:
        stored = r[at["checksum"]]
        if not (isinstance(stored, str) and stored.startswith("x3:")):
            out.append(r)
            continue
        key, parent = (r[at["thread_id"]], r[at["checkpoint_ns"]], r[at["checkpoint_id"]]), r[at["parent_checkpoint_id"]]
        doc, meta = r[at["checkpoint"]], r[at["metadata"]]
        try:
            codec.PLAIN.check_checkpoint(stored, key, parent, doc, meta)
            parsed = [json.loads(v) if isinstance(v, str) else v for v in (doc, meta)]
        except (CorruptRowError, ValueError) as exc:
            raise Differs([f"checkpoint {key!r} does not match its checksum: {exc}"]) from None
        fixed = list(r)
        fixed[at["checksum"]] = codec.PLAIN.checkpoint_checksum(key, parent, *parsed)
        out.append(tuple(fixed))
    return out


def _check_stored_op(d: Dialect, thread_id: str, wanted: Rows, expected: Expected | None) -> Op[None]:
    """``Differs`` unless the thread's rows read back as ``wanted`` and, with ``expected``, load so."""
    got = yield from thread_rows_op(d, thread_id, {t: c for t, (c, _) in wanted.items()})
    differs = [t for t, (_, data) in wanted.items() if comparable_rows(data) != comparable_rows(got[t][1])]
    if differs:
        raise Differs([f"rows of {', '.join(differs)} did not read back identical"])
    if expected is not None:
        try:
            loaded = yield from loaded_op(d, expected.serde, thread_id, expected.bc)
        except Exception as exc:  # an unreadable checkpoint is a finding of the verification
            raise Differs([f"loading failed: {type(exc).__name__}: {exc}"]) from None
        problems = _differences(expected.loaded, loaded)
        if problems:
            raise Differs(problems)


class Differs(Exception):
    def __init__(self, problems: list[str]) -> None:
        self.problems = problems


def loaded_op(d: Dialect, serde: Any, thread_id: str, bc: Any = None) -> Op[dict[tuple[str, str], Any]]:
    """Every checkpoint of a thread loaded (values decoded), as comparable data."""
    from threadline.read import jsonable

    where = ops.list_where(d, {"configurable": {"thread_id": thread_id}}, None, None)
    out: dict[tuple[str, str], Any] = {}
    after = None
    while True:
        page, after = yield from ops.list_page(d, serde, where, after, ops.PAGE_SIZE, bc)
        for t in page:
            c = t.config["configurable"]
            out[(c["checkpoint_ns"], c["checkpoint_id"])] = jsonable(
                (t.checkpoint, t.metadata, t.parent_config and t.parent_config["configurable"]["checkpoint_id"], t.pending_writes)
            )
        if after is None:
            return out


def _differences(want: dict[tuple[str, str], Any], got: dict[tuple[str, str], Any]) -> list[str]:
    if set(want) != set(got):
        return [f"checkpoints differ: {len(want)} in the archive, {len(got)} restored"]
    return [f"checkpoint {cid!r} (ns {ns!r}) loads differently" for (ns, cid) in sorted(want) if want[(ns, cid)] != got[(ns, cid)]]
