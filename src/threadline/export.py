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
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from threadline import adopt
from threadline.engine import ops
from threadline.engine import rows as R
from threadline.engine.dialect import Dialect, dumps_json
from threadline.engine.ops import Op, Q
from threadline.errors import ConfigError, ThreadlineError
from threadline.history import _doc, _json, all_thread_ids_op, node_of_task_path
from threadline.keys import thread_id_of

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


@contextmanager
def _official_source(url: str) -> Iterator[Any]:
    """A threadline saver shell on an official LangGraph database, opened read-only and
    never set up: only ``peek`` runs on it. ConfigError when it is no such database."""
    from threadline.urls import backend_of

    if backend_of(url) == "sqlite":
        import sqlite3

        from threadline.sqlite import SqliteSaver, path_of

        path = path_of(url)
        if not os.path.exists(path):
            raise ConfigError(f"import source {path!r} does not exist")
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        try:
            yield _checked(SqliteSaver(conn), path)
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"import source {path!r} is not a SQLite database ({exc})") from exc
        finally:
            conn.close()
    else:
        import psycopg

        from threadline.postgres import PostgresSaver, door_error

        try:
            conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
            conn.execute("SET default_transaction_read_only = on")
        except psycopg.Error as exc:
            raise door_error(exc, url) from exc
        with conn:
            yield _checked(PostgresSaver(conn), "the import source")


def check_source(url: str) -> None:
    """ConfigError/BackendError unless ``url`` is an official LangGraph database (opened read-only)."""
    with _official_source(url):
        pass


def _checked(source: Any, name: str) -> Any:
    if not source.peek(ops.schema_state(source.dialect)).official:
        raise ConfigError(
            f"{name} is not a database of LangGraph's official {type(source).__name__} "
            "(no checkpoints/writes tables of that layout)"
        )
    return source


def import_thread_op(
    d: Dialect, serde: Any, thread_id: str, records: Sequence[Any], *, replace: bool = False, verify: bool = True
) -> Op[tuple[int, int, list[str]]]:
    """Store one source thread's records (``adopt.read_thread_op``) in one transaction:
    (checkpoints, writes, mismatches). With ``verify``, a thread that does not read back
    as the source rows is not stored (the transaction is rolled back by the raise).

    Raises ThreadlineError when the thread already exists in threadline (unless ``replace``)."""
    exists = yield Q("SELECT 1 FROM threadline_checkpoints WHERE thread_id = ? LIMIT 1", (thread_id,))
    if exists:
        if not replace:
            raise ThreadlineError(f"thread {thread_id!r} already exists in the target database (pass replace=True, CLI --replace)")
        yield from ops.delete_thread(d, thread_id)
    n_ck, n_w = yield from adopt.store_op(d, serde, thread_id, records)
    problems = (yield from adopt.verify_op(d, serde, thread_id, records)) if verify else []
    if problems:
        raise _Mismatch(problems)
    if records:
        yield Q(
            "UPDATE threadline_threads SET created_at = (SELECT MIN(created_at) FROM threadline_checkpoints WHERE thread_id = ?), "
            "updated_at = (SELECT MAX(created_at) FROM threadline_checkpoints WHERE thread_id = ?) WHERE thread_id = ?",
            (thread_id, thread_id, thread_id),
        )
        yield from ops.restat(d, [thread_id])
    return n_ck, n_w, problems


class _Mismatch(Exception):
    def __init__(self, problems: list[str]) -> None:
        self.problems = problems


def _history_problems(graph: Any, saver: Any, thread_id: str, records: Sequence[Any]) -> list[str]:
    """With a graph: ``get_state_history`` of the imported thread lists every root checkpoint, newest first."""
    from threadline.history import bind_graph

    expected = sorted((r.checkpoint_id for r in records if r.checkpoint and r.checkpoint_ns == ""), reverse=True)
    try:
        got = [s.config["configurable"]["checkpoint_id"] for s in bind_graph(graph, saver).get_state_history({"configurable": {"thread_id": thread_id}})]
    except Exception as exc:  # any failure of the graph on the imported thread is a finding
        return [f"get_state_history failed ({type(exc).__name__}: {exc})"]
    return [] if got == expected else ["get_state_history differs from the source's checkpoints"]


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
    ``langgraph.checkpoint.postgres.PostgresSaver`` tables; it is opened read-only and
    never changed. Values are decoded with ``saver``'s serializer and threadline's load
    policy (never the official saver's: no stored constructor runs) and re-encoded by
    threadline's codec; blobs are stored once per (channel, version). With ``verify``
    every imported checkpoint must read back as the source rows (values, versions,
    metadata, parent, pending writes) or that thread is not stored and is reported with
    its mismatches; with ``graph`` its ``get_state_history`` is checked too. An existing
    target thread is an error unless ``replace``. Raises ConfigError when the source is
    not such a database.
    """
    report = ImportReport(source, [])
    with _official_source(source) as src:
        d = src.dialect
        ids = [thread_id_of(t) for t in thread_ids] if thread_ids is not None else src.peek(adopt.official_thread_ids_op(d))
        for i, tid in enumerate(ids):
            records = src.peek(adopt.read_thread_op(d, saver.serde, tid))
            try:
                n_ck, n_w, _ = saver.run(
                    import_thread_op(saver.dialect, saver.serde, tid, records, replace=replace, verify=verify), write=True
                )
                item = ThreadImport(tid, n_ck, n_w, None)
                if verify:
                    item.mismatches = _history_problems(graph, saver, tid, records) if graph is not None else []
                    item.verified = not item.mismatches
            except _Mismatch as exc:
                item = ThreadImport(tid, 0, 0, False, exc.problems)
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
    "check_source",
    "import_thread_op",
]
