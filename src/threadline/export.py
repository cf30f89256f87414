"""Export to Parquet (for DuckDB, Spark, MaxCompute-style ``dt`` partitions) and import
from databases written by LangGraph's official savers.

``export_parquet(saver, out_dir)`` writes three Hive-partitioned datasets, one
directory per table, partitioned by the UTC date ``dt=YYYY-MM-DD`` (seed 000's
``dt`` partitions), never channel values — metadata and sizes only:

* ``checkpoints/dt=…/*.parquet``: thread_id, checkpoint_ns, checkpoint_id,
  parent_checkpoint_id, step, source, run_id, created_at (timestamp, UTC),
  metadata (JSON text), channel_versions (JSON text), checkpoint_bytes;
* ``writes/dt=…/*.parquet``: thread_id, checkpoint_ns, checkpoint_id, task_id,
  idx, channel, task_path, node, type, bytes, created_at;
* ``blobs/dt=…/*.parquet``: thread_id, checkpoint_ns, channel, version, type,
  bytes, base_version, first_checkpoint_id (the earliest checkpoint referencing
  the blob; its date is the blob's ``dt``; ``dt=unreferenced`` for orphans).

``import_langgraph(source, saver)`` copies every thread of an official
``langgraph.checkpoint.sqlite.SqliteSaver`` file (or an official
``PostgresSaver`` database) into threadline — checkpoints with their values,
pending writes with their task_id, idx and task_path — and verifies each thread
by comparing ``list``/``get_tuple`` on both sides (values, metadata, parents,
pending writes), i.e. what ``get_state`` and ``get_state_history`` are built from.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from threadline.engine import ops
from threadline.engine import rows as R
from threadline.engine.dialect import Dialect, dumps_json
from threadline.engine.ops import Op, Q
from threadline.errors import ConfigError, ThreadlineError
from threadline.history import _doc, _json, all_thread_ids_op, jsonable, node_of_task_path
from threadline.keys import config_of, key_of, thread_id_of

TABLES = ("checkpoints", "writes", "blobs")


def _dt_of(ts: float | None) -> str:
    if ts is None:
        return "unreferenced"
    return _dt.datetime.fromtimestamp(float(ts), _dt.timezone.utc).strftime("%Y-%m-%d")


# --- export -----------------------------------------------------------------------------


def export_rows_op(d: Dialect, thread_id: str) -> Op[dict[str, list[dict[str, Any]]]]:
    """One thread's rows for the Parquet export (no value is read: sizes only)."""
    ck_size = f"{d.bytes_of('checkpoint', 'json')} + {d.bytes_of('metadata', 'json')}"
    cks = yield Q(
        "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, step, source, run_id, created_at, metadata, "
        f"checkpoint, {ck_size} FROM threadline_checkpoints WHERE thread_id = ? ORDER BY checkpoint_ns, checkpoint_id",
        (thread_id,),
    )
    out: dict[str, list[dict[str, Any]]] = {t: [] for t in TABLES}
    first_ref: dict[tuple[str, str, str], tuple[str, float]] = {}
    for r in cks:
        where = f"checkpoint ({r[0]!r}, {r[1]!r}, {r[2]!r})"
        doc = _doc(d, r[9], where)
        meta = _json(d, r[8], where)
        versions = doc.get("channel_versions") or {}
        out["checkpoints"].append(
            {
                "thread_id": r[0], "checkpoint_ns": r[1], "checkpoint_id": r[2], "parent_checkpoint_id": r[3],
                "step": r[4], "source": r[5], "run_id": r[6], "created_at": float(r[7]),
                "metadata": dumps_json(meta), "channel_versions": dumps_json(versions), "checkpoint_bytes": int(r[10]),
                "dt": _dt_of(r[7]),
            }
        )
        for ch, v in R.blob_pairs(doc):
            key = (r[1], ch, v)
            if key not in first_ref or r[2] < first_ref[key][0]:
                first_ref[key] = (r[2], float(r[7]))
    writes = yield Q(
        f"SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, type, {d.bytes_of('blob', 'blob')}, created_at "
        "FROM threadline_writes WHERE thread_id = ? ORDER BY checkpoint_ns, checkpoint_id, created_at, task_path, task_id, idx",
        (thread_id,),
    )
    for w in writes:
        out["writes"].append(
            {
                "thread_id": w[0], "checkpoint_ns": w[1], "checkpoint_id": w[2], "task_id": w[3], "idx": int(w[4]),
                "channel": w[5], "task_path": w[6] or "", "node": node_of_task_path(w[6], w[3]), "type": w[7],
                "bytes": int(w[8]), "created_at": float(w[9]), "dt": _dt_of(w[9]),
            }
        )
    blobs = yield Q(
        f"SELECT thread_id, checkpoint_ns, channel, version, type, {d.bytes_of('blob', 'blob')}, base_version FROM threadline_blobs "
        "WHERE thread_id = ? ORDER BY checkpoint_ns, channel, version",
        (thread_id,),
    )
    for b in blobs:
        ref = first_ref.get((b[1], b[2], b[3]))
        out["blobs"].append(
            {
                "thread_id": b[0], "checkpoint_ns": b[1], "channel": b[2], "version": b[3], "type": b[4], "bytes": int(b[5]),
                "base_version": b[6], "first_checkpoint_id": ref[0] if ref else None, "dt": _dt_of(ref[1] if ref else None),
            }
        )
    return out


def _schemas() -> dict[str, Any]:
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    return {
        "checkpoints": pa.schema([
            ("thread_id", pa.string()), ("checkpoint_ns", pa.string()), ("checkpoint_id", pa.string()),
            ("parent_checkpoint_id", pa.string()), ("step", pa.int64()), ("source", pa.string()), ("run_id", pa.string()),
            ("created_at", ts), ("metadata", pa.string()), ("channel_versions", pa.string()), ("checkpoint_bytes", pa.int64()),
            ("dt", pa.string()),
        ]),
        "writes": pa.schema([
            ("thread_id", pa.string()), ("checkpoint_ns", pa.string()), ("checkpoint_id", pa.string()), ("task_id", pa.string()),
            ("idx", pa.int64()), ("channel", pa.string()), ("task_path", pa.string()), ("node", pa.string()), ("type", pa.string()),
            ("bytes", pa.int64()), ("created_at", ts), ("dt", pa.string()),
        ]),
        "blobs": pa.schema([
            ("thread_id", pa.string()), ("checkpoint_ns", pa.string()), ("channel", pa.string()), ("version", pa.string()),
            ("type", pa.string()), ("bytes", pa.int64()), ("base_version", pa.string()), ("first_checkpoint_id", pa.string()),
            ("dt", pa.string()),
        ]),
    }


@dataclass
class ExportReport:
    """What ``export_parquet`` wrote: rows per table, the ``dt`` partitions, files, the directory."""

    out_dir: str
    rows: dict[str, int]
    partitions: dict[str, list[str]]
    files: list[str]
    threads: int

    def to_json(self) -> dict[str, Any]:
        return {"out_dir": self.out_dir, "rows": self.rows, "partitions": self.partitions, "files": self.files, "threads": self.threads}


def _write(table_name: str, rows: list[dict[str, Any]], root: str, batch: int) -> list[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not rows:
        return []
    schema = _schemas()[table_name]
    cols: dict[str, list] = {f.name: [] for f in schema}
    for r in rows:
        for name in cols:
            v = r.get(name)
            if name == "created_at" and v is not None:
                v = _dt.datetime.fromtimestamp(v, _dt.timezone.utc)
            cols[name].append(v)
    table = pa.Table.from_pydict(cols, schema=schema)
    written: list[str] = []
    pq.write_to_dataset(
        table,
        root_path=os.path.join(root, table_name),
        partition_cols=["dt"],
        basename_template=f"part-{batch:05d}-{{i}}.parquet",
        file_visitor=lambda f: written.append(f.path),
    )
    return written


def export_parquet(
    saver: Any,
    out_dir: str,
    *,
    thread_ids: Sequence[Any] | None = None,
    batch_threads: int = 500,
    progress: Callable[[int, int, str], None] | None = None,
) -> ExportReport:
    """Write checkpoints, writes and blob metadata as Parquet under ``out_dir`` partitioned by ``dt``.

    The ``checkpoints``, ``writes`` and ``blobs`` directories under ``out_dir`` are
    replaced (other files are left alone). Threads are read one transaction each
    and written in batches of ``batch_threads`` (bounded memory).
    ``progress(done, total, thread_id)`` is called after each thread.
    Raises ConfigError when ``out_dir`` is an existing file.
    """
    if os.path.isfile(out_dir):
        raise ConfigError(f"export target {out_dir!r} is a file, not a directory")
    ids = [thread_id_of(t) for t in thread_ids] if thread_ids is not None else saver.run(all_thread_ids_op(saver.dialect))
    os.makedirs(out_dir, exist_ok=True)
    for t in TABLES:
        shutil.rmtree(os.path.join(out_dir, t), ignore_errors=True)
    rows = {t: 0 for t in TABLES}
    parts: dict[str, set[str]] = {t: set() for t in TABLES}
    files: list[str] = []
    pending: dict[str, list[dict[str, Any]]] = {t: [] for t in TABLES}
    batch = 0

    def flush() -> None:
        nonlocal batch
        for t in TABLES:
            files.extend(_write(t, pending[t], out_dir, batch))
            pending[t] = []
        batch += 1

    for i, tid in enumerate(ids):
        got = saver.run(export_rows_op(saver.dialect, tid))
        for t in TABLES:
            pending[t] += got[t]
            rows[t] += len(got[t])
            parts[t] |= {r["dt"] for r in got[t]}
        if (i + 1) % max(1, batch_threads) == 0:
            flush()
        if progress:
            progress(i + 1, len(ids), tid)
    flush()
    return ExportReport(out_dir, rows, {t: sorted(p) for t, p in parts.items()}, sorted(files), len(ids))


# --- import -------------------------------------------------------------------------------


@dataclass
class ThreadImport:
    """One imported thread: checkpoints and writes copied, and whether verification found differences."""

    thread_id: str
    checkpoints: int
    writes: int
    verified: bool | None
    mismatches: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "checkpoints": self.checkpoints,
            "writes": self.writes,
            "verified": self.verified,
            "mismatches": self.mismatches,
        }


@dataclass
class ImportReport:
    source: str
    threads: list[ThreadImport]

    @property
    def ok(self) -> bool:
        return all(t.verified is not False for t in self.threads)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "ok": self.ok,
            "threads": [t.to_json() for t in self.threads],
            "checkpoints": sum(t.checkpoints for t in self.threads),
            "writes": sum(t.writes for t in self.threads),
        }


class _Source:
    """An official LangGraph database: the official saver (for decoding) plus raw SQL for idx/task_path."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.kind = "postgres" if url.startswith(("postgres://", "postgresql://")) else "sqlite"

    @contextmanager
    def open(self) -> Iterator[_Source]:
        if self.kind == "sqlite":
            import sqlite3

            from langgraph.checkpoint.sqlite import SqliteSaver as OfficialSqliteSaver

            from threadline.sqlite import path_of

            path = path_of(self.url)
            if not os.path.exists(path):
                raise ConfigError(f"import source {path!r} does not exist")
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
            try:
                tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                if not {"checkpoints", "writes"} <= tables or "blobs" in tables:
                    raise ConfigError(
                        f"{path!r} is not a database of langgraph.checkpoint.sqlite.SqliteSaver (tables: {sorted(tables)})"
                    )
                self.saver = OfficialSqliteSaver(conn)
                self._raw = lambda sql, p: conn.execute(sql, p).fetchall()
                self._writes_table, self._value_col = "writes", "value"
                yield self
            finally:
                conn.close()
        else:
            import psycopg
            from langgraph.checkpoint.postgres import PostgresSaver as OfficialPostgresSaver
            from psycopg.rows import dict_row

            with psycopg.connect(self.url, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
                self.saver = OfficialPostgresSaver(conn)

                def raw(sql: str, p: Sequence[Any]) -> list:
                    with conn.cursor(row_factory=psycopg.rows.tuple_row) as cur:
                        cur.execute(sql.replace("?", "%s"), p)
                        return cur.fetchall()

                self._raw = raw
                self._writes_table, self._value_col = "checkpoint_writes", "blob"
                yield self

    def thread_ids(self) -> list[str]:
        return sorted(r[0] for r in self._raw("SELECT DISTINCT thread_id FROM checkpoints", ()))

    def tuples(self, thread_id: str) -> list:
        return sorted(
            self.saver.list({"configurable": {"thread_id": thread_id}}),
            key=lambda t: (t.config["configurable"].get("checkpoint_ns", ""), t.config["configurable"]["checkpoint_id"]),
        )

    def write_keys(self, thread_id: str) -> dict[tuple[str, str], list[tuple[str, int, str, str]]]:
        """(ns, checkpoint_id) → [(task_id, idx, task_path, channel)] ordered by task_id, idx."""
        found = self._raw(
            f"SELECT checkpoint_ns, checkpoint_id, task_id, idx, task_path, channel FROM {self._writes_table} "
            "WHERE thread_id = ? ORDER BY checkpoint_ns, checkpoint_id, task_id, idx",
            (thread_id,),
        )
        out: dict[tuple[str, str], list] = defaultdict(list)
        for ns, cid, task_id, idx, path, channel in found:
            out[(ns, cid)].append((task_id, int(idx), path or "", channel))
        return out


def _epoch(ts: Any, default: float) -> float:
    try:
        return _dt.datetime.fromisoformat(str(ts)).timestamp()
    except (TypeError, ValueError):
        return default


def import_thread_op(
    d: Dialect, serde: Any, thread_id: str, tuples: Sequence[Any], write_keys: dict[tuple[str, str], list], *, replace: bool = False
) -> Op[tuple[int, int]]:
    """Store one source thread's checkpoint tuples (oldest first) and their writes, in one transaction.

    Raises ThreadlineError when the thread already exists in threadline (unless ``replace``).
    """
    exists = yield Q("SELECT 1 FROM threadline_checkpoints WHERE thread_id = ? LIMIT 1", (thread_id,))
    if exists:
        if not replace:
            raise ThreadlineError(f"thread {thread_id!r} already exists in the target database (pass replace=True, CLI --replace)")
        yield from ops.delete_thread(d, thread_id)
    stored: set[tuple[str, str, str]] = set()
    n_writes = 0
    first, last = None, None
    now = time.time()
    for t in tuples:
        conf = t.config["configurable"]
        ns, cid = conf.get("checkpoint_ns", ""), conf["checkpoint_id"]
        parent = t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None
        cp = dict(t.checkpoint)
        versions = cp.get("channel_versions") or {}
        new_versions = {ch: v for ch, v in versions.items() if (ns, ch, R.version_key(v)) not in stored}
        stored |= {(ns, ch, R.version_key(v)) for ch, v in new_versions.items()}
        put_conf = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}
        if parent:
            put_conf["configurable"]["checkpoint_id"] = parent
        yield from ops.put(d, serde, put_conf, cp, dict(t.metadata or {}), new_versions)
        created = _epoch(cp.get("ts"), now)
        first = created if first is None else min(first, created)
        last = created if last is None else max(last, created)
        yield Q(
            "UPDATE threadline_checkpoints SET created_at = ? WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
            (created, thread_id, ns, cid),
        )
        keys = write_keys.get((ns, cid), [])
        by_task: dict[str, list] = defaultdict(list)
        for k in keys:
            by_task[k[0]].append(k)
        used: dict[str, int] = defaultdict(int)
        rows = []
        key = key_of(config_of(thread_id, ns, cid))
        for task_id, channel, value in t.pending_writes or []:
            ks = by_task.get(task_id, [])
            i = used[task_id]
            used[task_id] += 1
            idx, path = (ks[i][1], ks[i][2]) if i < len(ks) else (i, "")
            _, (row,) = R.write_rows(serde, key, [(channel, value)], task_id, path, created)
            rows.append((*row[:4], idx, *row[5:]))
        if rows:
            yield Q(
                "INSERT INTO threadline_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, type, blob, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                rows,
                many=True,
            )
            n_writes += len(rows)
    if tuples:
        yield Q("UPDATE threadline_threads SET created_at = ?, updated_at = ? WHERE thread_id = ?", (first, last, thread_id))
        yield from ops.restat(d, [thread_id])
    return len(tuples), n_writes


def _comparable(t: Any) -> tuple:
    conf = t.config["configurable"]
    return (
        conf.get("checkpoint_ns", ""),
        conf["checkpoint_id"],
        t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None,
        json.dumps(jsonable(t.checkpoint.get("channel_values") or {}), sort_keys=True, default=str),
        json.dumps(jsonable(t.checkpoint.get("channel_versions") or {}), sort_keys=True, default=str),
        json.dumps(jsonable(t.checkpoint.get("versions_seen") or {}), sort_keys=True, default=str),
        json.dumps(jsonable(dict(t.metadata or {})), sort_keys=True, default=str),
        json.dumps(jsonable(sorted(((w[0], w[1], jsonable(w[2])) for w in t.pending_writes or []), key=lambda w: (w[0], w[1], json.dumps(w[2], default=str)))), default=str),
    )


def verify_thread(source_saver: Any, target_saver: Any, thread_id: str, graph: Any = None) -> list[str]:
    """Differences between a thread on two savers: every checkpoint (all namespaces) and the head.

    Compares what LangGraph's ``get_state``/``get_state_history`` are built from:
    checkpoint ids, parents, channel values, versions, ``versions_seen``,
    metadata and pending writes; with ``graph`` also the snapshots themselves.
    Returns human-readable mismatch descriptions (empty: identical).
    """
    conf = {"configurable": {"thread_id": thread_id}}
    a = {(_comparable(t)[0], _comparable(t)[1]): _comparable(t) for t in source_saver.list(conf)}
    b = {(_comparable(t)[0], _comparable(t)[1]): _comparable(t) for t in target_saver.list(conf)}
    out = []
    for k in sorted(set(a) | set(b)):
        if k not in b:
            out.append(f"checkpoint {k} missing in target")
        elif k not in a:
            out.append(f"checkpoint {k} not in source")
        elif a[k] != b[k]:
            fields = ["ns", "id", "parent", "values", "versions", "versions_seen", "metadata", "pending_writes"]
            diff = [f for f, x, y in zip(fields, a[k], b[k]) if x != y]
            out.append(f"checkpoint {k} differs in {diff}")
    ha, hb = source_saver.get_tuple(conf), target_saver.get_tuple(conf)
    if (ha and _comparable(ha)) != (hb and _comparable(hb)):
        out.append("head (get_tuple without checkpoint_id) differs")
    if graph is not None and not out:
        from threadline.history import bind_graph

        ga, gb = bind_graph(graph, source_saver), bind_graph(graph, target_saver)
        if jsonable(ga.get_state(conf).values) != jsonable(gb.get_state(conf).values):
            out.append("get_state values differ")
        hist_a = [(s.config["configurable"]["checkpoint_id"], jsonable(s.values), s.next) for s in ga.get_state_history(conf)]
        hist_b = [(s.config["configurable"]["checkpoint_id"], jsonable(s.values), s.next) for s in gb.get_state_history(conf)]
        if hist_a != hist_b:
            out.append("get_state_history differs")
    return out


def import_langgraph(
    source: str,
    saver: Any,
    *,
    thread_ids: Sequence[Any] | None = None,
    verify: bool = True,
    replace: bool = False,
    graph: Any = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> ImportReport:
    """Copy threads from an official LangGraph database into ``saver`` (one transaction per thread).

    ``source``: a file path / ``sqlite:///path`` written by
    ``langgraph.checkpoint.sqlite.SqliteSaver``, or a ``postgresql://`` URL of
    ``langgraph.checkpoint.postgres.PostgresSaver`` tables. Values are decoded
    with the official saver's serializer and re-encoded by threadline's codec;
    blobs are stored once per (channel, version). With ``verify`` each thread is
    compared on both sides (``verify_thread``; with ``graph`` also ``get_state``
    and ``get_state_history``). An existing target thread is an error unless
    ``replace``. Raises ConfigError when the source is not such a database.
    """
    report = ImportReport(source, [])
    with _Source(source).open() as src:
        ids = [thread_id_of(t) for t in thread_ids] if thread_ids is not None else src.thread_ids()
        for i, tid in enumerate(ids):
            tuples = src.tuples(tid)
            n_ck, n_w = saver.run(
                import_thread_op(saver.dialect, saver.serde, tid, tuples, src.write_keys(tid), replace=replace), write=True
            )
            item = ThreadImport(tid, n_ck, n_w, None)
            if verify:
                item.mismatches = verify_thread(src.saver, saver, tid, graph)
                item.verified = not item.mismatches
            report.threads.append(item)
            if progress:
                progress(i + 1, len(ids), tid)
    return report


__all__ = [
    "ExportReport",
    "ImportReport",
    "ThreadImport",
    "export_parquet",
    "export_rows_op",
    "import_langgraph",
    "import_thread_op",
    "verify_thread",
]
