"""Export to Parquet (for DuckDB, Spark, MaxCompute-style ``dt`` partitions).

``export_parquet(saver, out_dir)`` writes three Hive-partitioned datasets, one
directory per table, partitioned by the UTC date ``dt=YYYY-MM-DD`` (seed 000's
``dt`` partitions). Without ``values``: metadata and sizes only; with ``values=True``
each blob and each pending write also carries its decoded value as JSON text
(``value``, through threadline's load policy, rendered as ``read.jsonable`` does):

* ``checkpoints/dt=…/*.parquet``: thread_id, checkpoint_ns, checkpoint_id,
  parent_checkpoint_id, step, source, run_id, created_at (timestamp, UTC),
  metadata (JSON text), channel_versions (JSON text), checkpoint_bytes;
* ``writes/dt=…/*.parquet``: thread_id, checkpoint_ns, checkpoint_id, task_id,
  idx, channel, task_path, node, type, bytes, created_at;
* ``blobs/dt=…/*.parquet``: thread_id, checkpoint_ns, channel, version, type,
  bytes, base_version, first_checkpoint_id (the earliest checkpoint referencing
  the blob; its date is the blob's ``dt``; ``dt=unreferenced`` for orphans).

With values, seed 000's warehouse query runs on the export, e.g. in DuckDB the latest
``messages`` of every thread (``docs/operations.md`` has the query that follows the head
checkpoint, which stays right after a rollback)::

    SELECT thread_id, version, value FROM (
      SELECT *, ROW_NUMBER() OVER (PARTITION BY thread_id ORDER BY version DESC) AS rn
      FROM read_parquet('out/blobs/*/*.parquet', hive_partitioning = true)
      WHERE checkpoint_ns = '' AND channel = 'messages' AND dt BETWEEN '2025-01-01' AND '2025-12-31'
    ) WHERE rn = 1 ORDER BY thread_id
"""

from __future__ import annotations

import datetime as _dt
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from threadline import codec
from threadline.storage import ops
from threadline.storage import rows as R
from threadline.storage.dialect import Dialect, dumps_json
from threadline.storage.ops import Op, Q
from threadline.errors import ConfigError
from threadline.extras import require
from threadline.read import all_thread_ids_op, jsonable
from threadline.read.tasks import node_of_write, push_nodes_op
from threadline.keys import thread_id_of
from threadline.transfer.backup import refuse_links

TABLES = ("checkpoints", "writes", "blobs")


def _dt_of(ts: float | None) -> str:
    if ts is None:
        return "unreferenced"
    return _dt.datetime.fromtimestamp(float(ts), _dt.timezone.utc).strftime("%Y-%m-%d")


# --- export -----------------------------------------------------------------------------


def _json_value(serde: Any, resolved: Any, where: str) -> str | None:
    """A stored value decoded (load policy) as JSON text; None for an empty channel."""
    if resolved[0] == codec.EMPTY:
        return None
    return dumps_json(jsonable(codec.load(serde, resolved, where)), sort_keys=False)


def export_rows_op(d: Dialect, thread_id: str, serde: Any = None, bc: Any = None) -> Op[dict[str, list[dict[str, Any]]]]:
    """One thread's rows for the Parquet export: sizes only, or with ``serde`` the decoded
    value of every blob and write too (``value``)."""
    cks = yield Q(d.export_checkpoints(), (thread_id,))
    out: dict[str, list[dict[str, Any]]] = {t: [] for t in TABLES}
    first_ref: dict[tuple[str, str, str], tuple[str, float]] = {}
    for r in cks:
        where = f"checkpoint ({r[0]!r}, {r[1]!r}, {r[2]!r})"
        doc = d.load_object(r[9], where)
        meta = d.load_json(r[8], where)
        versions = R.all_versions(doc)
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
    writes = yield Q(d.export_writes(bool(serde)), (thread_id,))
    pushed = yield from push_nodes_op(d, [(w[0], w[1], w[2], w[3], w[6]) for w in writes])
    for w in writes:
        row = {
            "thread_id": w[0], "checkpoint_ns": w[1], "checkpoint_id": w[2], "task_id": w[3], "idx": int(w[4]),
            "channel": w[5], "task_path": w[6] or "", "node": node_of_write(pushed, (w[0], w[1], w[2], w[3]), w[6]), "type": w[7],
            "bytes": int(w[8]), "created_at": float(w[9]), "dt": _dt_of(w[9]),
        }
        if serde:
            value = (bc or codec.PLAIN).load(serde, R.write_row_ref(w[0], w[1], w[2], w[3], w[4], w[5]), w[7], w[10])
            row["value"] = dumps_json(jsonable(value), sort_keys=False)
        out["writes"].append(row)
    blobs = yield Q(d.export_blobs(), (thread_id,))
    values = (yield from ops.fetch_blobs(d, [tuple(b[:4]) for b in blobs], bc=bc)) if serde else {}
    for b in blobs:
        ref = first_ref.get((b[1], b[2], b[3]))
        row = {
            "thread_id": b[0], "checkpoint_ns": b[1], "channel": b[2], "version": b[3], "type": b[4], "bytes": int(b[5]),
            "base_version": b[6], "first_checkpoint_id": ref[0] if ref else None, "dt": _dt_of(ref[1] if ref else None),
        }
        if serde:
            row["value"] = _json_value(serde, values[tuple(b[:4])], f"blob ({b[0]!r}, {b[1]!r}, {b[2]!r}, {b[3]!r})")
        out["blobs"].append(row)
    return out


def _schemas(values: bool = False) -> dict[str, Any]:
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    schemas = {
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
    if values:
        for t in ("writes", "blobs"):
            schemas[t] = schemas[t].append(pa.field("value", pa.string()))
    return schemas


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


def _write(table_name: str, rows: list[dict[str, Any]], root: str, batch: int, values: bool = False) -> list[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not rows:
        return []
    schema = _schemas(values)[table_name]
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
        # Arrow's worker threads could still be running while the interpreter exits, which
        # aborts the process ("terminate called without an active exception") under load
        use_threads=False,
    )
    return written


def export_parquet(
    saver: Any,
    out_dir: str,
    *,
    thread_ids: Sequence[Any] | None = None,
    batch_threads: int = 500,
    values: bool = False,
    progress: Callable[[int, int, str], None] | None = None,
) -> ExportReport:
    """Write checkpoints, writes and blob metadata as Parquet under ``out_dir`` partitioned by ``dt``.

    The ``checkpoints``, ``writes`` and ``blobs`` directories under ``out_dir`` are
    replaced (other files are left alone). Threads are read one transaction each
    and written in batches of ``batch_threads`` (bounded memory). ``values``: add each blob's
    and write's decoded value as JSON (``value``; CorruptRowError for a row that does not load).
    ``progress(done, total, thread_id)`` is called after each thread.
    Raises ConfigError when ``out_dir`` is an existing file, or it or one of the directories it
    replaces is a symbolic link (an output is never written through one); MissingExtraError
    without pyarrow (``pip install 'threadline[export]'``).
    """
    require("export", "Parquet export")
    refuse_links(out_dir, *(os.path.join(out_dir, t) for t in TABLES))
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
            files.extend(_write(t, pending[t], out_dir, batch, values))
            pending[t] = []
        batch += 1

    for i, tid in enumerate(ids):
        got = saver.run(export_rows_op(saver.dialect, tid, saver.serde if values else None, saver.blob_codec))
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


__all__ = ["ExportReport", "export_parquet", "export_rows_op"]
