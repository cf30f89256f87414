"""Thread bundles: some threads with their values in one file, to attach to a bug report.

A bundle is a threadline archive (``transfer.backup``) holding only the named threads,
every checkpoint, blob and pending write as stored; ``restore`` (CLI ``threadline
bundle-import``) loads it into any threadline database and verifies it. The bundle's
``threadline_bundle`` table says what it holds.

``redact`` names channels whose values must not leave. Every place LangGraph carries a
channel's value is rewritten before it is written to the file, so the original bytes are
never in it:

* every stored value of a redacted channel (in a blob row, or kept in its checkpoint's
  document: ``storage.inline``), and every pending write to it, becomes the string
  ``"[redacted]"`` (an empty channel stays empty, and one holding None holds None);
* LangGraph's input channel ``__start__`` (a run's input holds any channel's value) is
  redacted with them;
* the payloads LangGraph passes between nodes, which may hold any channel's value, are
  redacted whole while their shape is kept, so the thread runs as before: a ``Send``
  (``__pregel_tasks`` values and writes, the ``pending_sends`` of checkpoints written before
  LangGraph v4) keeps its node and its argument becomes ``"[redacted]"``; an interrupt
  (``__interrupt__`` writes) keeps its id and its value becomes ``"[redacted]"``; a resume
  value (``__resume__`` writes) becomes ``"[redacted]"`` (a list of them keeps its length);
* a node's output for a redacted channel in checkpoint metadata ``writes``.

Rewritten values are sealed to their rows and rewritten checkpoints re-sealed, with the
saver's keys. Not redacted: other channels (a value a node copied into another channel is
that channel's: redact it too), metadata other than ``writes``, and error messages
(``__error__`` writes: a bug report needs them).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from threadline import codec
from threadline.codec.serde import inspecting
from threadline.errors import ConfigError
from threadline.keys import thread_id_of
from threadline.read.common import INTERRUPT, RESUME, TASKS
from threadline.storage import ops
from threadline.storage import rows as R
from threadline.storage.dialect import Dialect, dumps_json
from threadline.storage.ops import Op, Q
from threadline.lifecycle.cold import cold_archives_op
from threadline.lifecycle.inline import chained, inliner
from threadline.lifecycle.thread_rows import Rows, Transform
from threadline.transfer.backup import _counts_op, _fresh_path, write_archive

REDACTED = "[redacted]"
START = "__start__"  # LangGraph's input channel
# The writes whose payloads pass between nodes (Send packets, interrupts, resume values): redacted
# whole, their shape kept, whenever a channel is redacted.
CARRIERS = frozenset({TASKS, INTERRUPT, RESUME})


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


def _blank(value: Any) -> Any:
    """A payload passed between nodes with every value in it redacted and its shape kept: a
    ``Send`` keeps its node, an ``Interrupt`` its id, a list or tuple its length."""
    from langgraph.types import Interrupt, Send  # on first use: it imports langchain_core's runnables and langsmith

    if isinstance(value, Send):
        return Send(value.node, REDACTED)
    if isinstance(value, Interrupt):
        return dataclasses.replace(value, value=REDACTED)
    if type(value) in (list, tuple):
        return type(value)(_blank(v) for v in value)
    return REDACTED


def _redactor(saver: Any, channels: frozenset[str]) -> Transform:
    """The rows of a thread rewritten as the module docstring says (an operation on the source:
    a Send channel's values are read through their delta chains)."""
    bc, serde = saver.blob_codec, saver.serde
    reading = inspecting(serde)  # the payloads are rebuilt only as LangGraph's own types

    def stored(row: Any, value: Any) -> tuple[str, bytes]:
        return bc.store(row, *codec.encode(serde, value))

    def blobs(d: Dialect, tid: str, cols: list[str], data: list[tuple]) -> Op[list[tuple]]:
        at = {c: i for i, c in enumerate(cols)}
        key = lambda r: (tid, r[at["checkpoint_ns"]], r[at["channel"]], r[at["version"]])  # noqa: E731
        sends = [key(r) for r in data if r[at["channel"]] == TASKS and r[at["type"]] != codec.EMPTY]
        values = (yield from ops.fetch_blobs(d, sends, bc=bc)) if sends else {}
        out = []
        for r in data:
            k, ch = key(r), r[at["channel"]]
            if r[at["type"]] != codec.EMPTY and (ch in channels or ch == TASKS):
                value = REDACTED if ch in channels else _blank(codec.load(reading, values[k], f"blob {k!r}"))
                r = _with(at, r, base_version=None, **dict(zip(("type", "blob"), stored(R.blob_row_ref(*k), value))))
            out.append(r)
        return out

    def writes(cols: list[str], data: list[tuple]) -> list[tuple]:
        at = {c: i for i, c in enumerate(cols)}
        out = []
        for r in data:
            ch = r[at["channel"]]
            if ch in channels or ch in CARRIERS:
                ref = R.write_row_ref(*(r[at[c]] for c in ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx", "channel")))
                value = REDACTED if ch in channels else _blank(bc.load(reading, ref, r[at["type"]], r[at["blob"]]))
                r = _with(at, r, **dict(zip(("type", "blob"), stored(ref, value))))
            out.append(r)
        return out

    def checkpoint(at: dict[str, int], r: tuple) -> tuple:
        key, parent = tuple(r[at[c]] for c in ("thread_id", "checkpoint_ns", "checkpoint_id")), r[at["parent_checkpoint_id"]]
        doc, meta = (json.loads(r[at[c]]) if isinstance(r[at[c]], str) else r[at[c]] for c in ("checkpoint", "metadata"))
        new_doc, new_meta = dict(doc), _metadata(meta, channels)
        if doc.get(R.SENDS):
            ref, (tag, data) = R.sends_ref(*key), doc[R.SENDS]
            sends = _blank(bc.load(reading, ref, tag, base64.b64decode(data)))
            tag, data = stored(ref, sends)
            new_doc[R.SENDS] = [tag, base64.b64encode(data).decode()]
        scalars = R.scalar_map(doc)  # values kept in the document (``storage.inline``)
        if not channels.isdisjoint(scalars):
            new_doc[R.SCALARS] = {ch: [e[0], REDACTED] if ch in channels else e for ch, e in scalars.items()}
        if (new_doc, new_meta) == (doc, meta):
            return r
        bc.check_checkpoint(r[at["checksum"]], key, parent, doc, meta)  # a damaged row is never re-sealed
        return _with(at, r, checkpoint=dumps_json(new_doc, sort_keys=False), metadata=dumps_json(new_meta, sort_keys=False),
                     checksum=bc.checkpoint_checksum(key, parent, new_doc, new_meta))

    def transform(d: Dialect, tid: str, rows: Rows) -> Op[Rows]:
        rows = dict(rows)
        if "blobs" in rows:
            cols, data = rows["blobs"]
            rows["blobs"] = (cols, (yield from blobs(d, tid, cols, data)))
        if "writes" in rows:
            cols, data = rows["writes"]
            rows["writes"] = (cols, writes(cols, data))
        if "checkpoints" in rows:
            cols, data = rows["checkpoints"]
            at = {c: i for i, c in enumerate(cols)}
            rows["checkpoints"] = (cols, [checkpoint(at, r) for r in data])
        return rows

    return transform


def _with(at: dict[str, int], row: tuple, **columns: Any) -> tuple:
    """``row`` with the named columns (those it has) replaced."""
    out = list(row)
    for col, v in columns.items():
        if col in at:
            out[at[col]] = v
    return tuple(out)


def _metadata(meta: Any, channels: frozenset[str]) -> Any:
    """Checkpoint metadata with a node's output for a redacted channel (``writes``) replaced."""
    writes = meta.get("writes") if isinstance(meta, dict) else None
    if not isinstance(writes, dict):
        return meta
    return {**meta, "writes": {node: {k: REDACTED if k in channels else v for k, v in out.items()} if isinstance(out, dict) else out
                               for node, out in writes.items()}}


def _mark_op(d: Dialect, ids: list[str], channels: list[str]) -> Op[dict[str, int]]:
    """Record a bundle's threads and redacted channels in the archive; its rows per table."""
    yield Q(d.CREATE_BUNDLE_TABLE)
    yield Q(d.INSERT_BUNDLE_ROW, (time.time(), json.dumps(ids), json.dumps(channels)))
    counts = yield from _counts_op(d)
    return {t: counts[t] for t in ("checkpoints", "blobs", "writes")}


def bundle(saver: Any, thread_ids: Sequence[Any], to: str, *, redact: Sequence[str] = (), overwrite: bool = False) -> BundleReport:
    """Write ``thread_ids`` of ``saver`` with their values to the file ``to``, ``redact``
    channels replaced (see the module docstring); a cold thread is read from its archive (nothing
    restored). Raises ConfigError for no thread, a
    thread without checkpoints, or an existing ``to`` (unless ``overwrite``)."""
    ids = [thread_id_of(t) for t in thread_ids]
    if not ids:
        raise ConfigError("name at least one thread to bundle")
    from threadline.read import list_threads

    known = {t.thread_id for t in list_threads(saver, thread_ids=ids, limit=len(ids), official=False).threads}
    missing = [t for t in ids if t not in known]
    if missing:
        raise ConfigError(f"no such thread(s): {', '.join(map(repr, missing))}")
    _fresh_path(to, overwrite)
    channels = frozenset(redact) | ({START} if redact else set())

    from threadline.transfer.official import thread_view

    cold = saver.run(cold_archives_op(saver.dialect, ids))
    hot = [t for t in ids if t not in cold]
    if hot:
        redactor = _redactor(saver, channels) if channels else None
        write_archive(to, saver, thread_ids=hot, transform=chained(inliner(saver.blob_codec), redactor))
    if cold:  # cold threads (``lifecycle.cold``): from their archives, read into a view (nothing restored)
        with thread_view(saver, list(cold), official=False) as view:
            write_archive(to, view, thread_ids=list(cold), transform=_redactor(view, channels) if channels else None)
    from threadline.backends.sqlite import SqliteSaver

    with SqliteSaver.from_conn_string(to, adopt=False) as archive:
        rows = archive.run(_mark_op(archive.dialect, ids, sorted(channels)), write=True)
    return BundleReport(to, os.path.getsize(to), ids, rows, sorted(channels))


__all__ = ["REDACTED", "BundleReport", "bundle"]
