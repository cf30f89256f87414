"""Thread bundles: some threads with their values in one file, to attach to a bug report.

A bundle is a threadline archive (``transfer.backup``) holding only the named threads,
every checkpoint, blob and pending write as stored; ``restore`` (CLI ``threadline
bundle-import``) loads it into any threadline database and verifies it. ``redact``
names channels whose values must not leave: every stored version of such a channel and
every pending write to it is replaced by the string ``"[redacted]"`` (and a node's output
for it in checkpoint metadata ``writes``) before it is written to the file, so the
original bytes are never in it. LangGraph's input channel ``__start__`` carries a run's
input, any channel's value among it, so it is redacted with them. The bundle's
``threadline_bundle`` table says what it holds.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from threadline import codec
from threadline.errors import ConfigError
from threadline.keys import thread_id_of
from threadline.storage.dialect import dumps_json
from threadline.transfer.backup import Rows, _fresh_path, write_archive

REDACTED = "[redacted]"
START = "__start__"  # LangGraph's input channel


@dataclass
class BundleReport:
    """A bundle written: its file, size in bytes, threads, rows per table, redacted channels."""

    path: str
    bytes: int
    threads: list[str]
    rows: dict[str, int]
    redacted: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "bytes": self.bytes, "threads": self.threads, "rows": self.rows, "redacted": self.redacted}


def _redactor(saver: Any, channels: frozenset[str]) -> Any:
    stored_type, stored = saver.blob_codec.pack(*codec.encode(saver.serde, REDACTED))

    def values(cols: list[str], rows: list[tuple], **replace: Any) -> list[tuple]:
        at = {c: i for i, c in enumerate(cols)}
        out = []
        for r in rows:
            if r[at["channel"]] in channels:
                r = list(r)
                for col, v in replace.items():
                    if col in at:
                        r[at[col]] = v
                r = tuple(r)
            out.append(r)
        return out

    def metadata(text: Any) -> Any:
        meta = json.loads(text) if isinstance(text, str) else text
        writes = meta.get("writes") if isinstance(meta, dict) else None
        if isinstance(writes, dict):
            for node, out in writes.items():
                if isinstance(out, dict):
                    writes[node] = {k: REDACTED if k in channels else v for k, v in out.items()}
        return dumps_json(meta, sort_keys=False)

    def transform(rows: Rows) -> Rows:
        rows = dict(rows)
        if "blobs" in rows:
            cols, data = rows["blobs"]
            rows["blobs"] = (cols, values(cols, data, type=stored_type, blob=stored, base_version=None))
        if "writes" in rows:
            cols, data = rows["writes"]
            rows["writes"] = (cols, values(cols, data, type=stored_type, blob=stored))
        if "checkpoints" in rows:
            cols, data = rows["checkpoints"]
            i = cols.index("metadata")
            rows["checkpoints"] = (cols, [(*r[:i], metadata(r[i]), *r[i + 1:]) for r in data])
        return rows

    return transform


def bundle(saver: Any, thread_ids: Sequence[Any], to: str, *, redact: Sequence[str] = (), overwrite: bool = False) -> BundleReport:
    """Write ``thread_ids`` of ``saver`` with their values to the file ``to``, ``redact``
    channels replaced (see the module docstring). Raises ConfigError for no thread, a
    thread without checkpoints, or an existing ``to`` (unless ``overwrite``)."""
    ids = [thread_id_of(t) for t in thread_ids]
    if not ids:
        raise ConfigError("name at least one thread to bundle")
    from threadline.read import list_threads

    known = {t.thread_id for t in list_threads(saver, thread_ids=ids, limit=len(ids)).threads}
    missing = [t for t in ids if t not in known]
    if missing:
        raise ConfigError(f"no such thread(s): {', '.join(map(repr, missing))}")
    _fresh_path(to, overwrite)
    channels = frozenset(redact) | ({START} if redact else set())
    write_archive(to, saver, thread_ids=ids, transform=_redactor(saver, channels) if channels else None)
    conn = sqlite3.connect(to)
    try:
        with conn:
            conn.execute("CREATE TABLE threadline_bundle (created_at REAL, threads TEXT, redacted TEXT)")
            conn.execute("INSERT INTO threadline_bundle VALUES (?, ?, ?)", (time.time(), json.dumps(ids), json.dumps(sorted(channels))))
        rows = {t: conn.execute(f"SELECT COUNT(*) FROM threadline_{t}").fetchone()[0] for t in ("checkpoints", "blobs", "writes")}
    finally:
        conn.close()
    return BundleReport(to, os.path.getsize(to), ids, rows, sorted(channels))


__all__ = ["REDACTED", "BundleReport", "bundle"]
