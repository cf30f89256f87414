"""Bulk state correction and threads made from a JSON state, through the application's graph.

``bulk_edit(saver, graph, values, threads=…, metadata=…)`` applies one state update to many
threads: for each selected thread a new checkpoint on its head, written by
``graph.update_state`` (source ``update``; the graph's reducers apply, as for any update),
marked in its metadata ``threadline_edit: <mark>``. The mark is the edit's name, or a digest of
the values and ``as_node``; a thread holding a checkpoint with that mark is skipped, so an edit
interrupted halfway is resumed by running it again, and a finished one reruns as a no-op. A
thread whose head would not change is skipped too. Without ``apply`` it is a preview
(``BulkEditReport``: per thread, per channel, the change), nothing written.

``create_thread(saver, graph, thread_id, values)`` starts a thread from a state (e.g. read
from a JSON file: messages as ``{"type": "human", "content": …}`` or ``{"role": "user", …}``).

Errors: ``ConfigError`` (values not a mapping, a channel the graph's state lacks, an existing
thread for ``create_thread``, a selection of nothing), ``NotFoundError`` (a thread pattern
matching nothing).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from threadline.errors import ConfigError
from threadline.keys import thread_id_of
from threadline.lifecycle.annotate import annotate_op
from threadline.read import list_threads
from threadline.read.channel import same_value as _same, summarize
from threadline.read.common import bind_graph, jsonable
from threadline.read.names import expand_threads, known_thread_op

MARK = "threadline_edit"  # the metadata key of a bulk edit's checkpoints
PAGE = 500  # threads listed per query when selecting by metadata


@dataclass
class ThreadEdit:
    """One thread of a bulk edit: ``status`` is ``edited`` (written), ``would edit`` (preview),
    ``already applied`` (a checkpoint carries the mark) or ``unchanged`` (the head would not
    change); ``changes``: channel → summary; ``checkpoint_id``: the new checkpoint, when written."""

    thread_id: str
    status: str
    changes: dict[str, str] = field(default_factory=dict)
    checkpoint_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"thread_id": self.thread_id, "status": self.status, "changes": self.changes, "checkpoint_id": self.checkpoint_id}


@dataclass
class BulkEditReport:
    """A bulk edit over ``threads`` (``ThreadEdit`` each, in thread_id order) with its ``mark``."""

    mark: str
    applied: bool
    threads: list[ThreadEdit] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(t.status == status for t in self.threads)

    def to_json(self) -> dict[str, Any]:
        return {"mark": self.mark, "applied": self.applied, "threads": [t.to_json() for t in self.threads],
                "counts": {s: self.count(s) for s in ("edited", "would edit", "already applied", "unchanged")}}


def edit_mark(values: Mapping[str, Any], as_node: str | None = None) -> str:
    """The default mark of an edit: 16 hex digits of a SHA-256 over its values (as JSON) and ``as_node``."""
    text = json.dumps([jsonable(dict(values)), as_node], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _checked(graph: Any, values: Any) -> dict[str, Any]:
    if not isinstance(values, Mapping) or not values:
        raise ConfigError(f"the state edit must be a non-empty JSON object of channel values, got {type(values).__name__}")
    known = set(getattr(graph, "channels", None) or {})
    unknown = sorted(k for k in values if known and k not in known)
    if unknown:
        raise ConfigError(f"the graph's state has no channel {unknown[0]!r} (channels: {', '.join(sorted(c for c in known if not c.startswith(('__', 'branch:'))))})")
    return dict(values)


def _config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def select_threads(saver: Any, threads: Sequence[str] | None = None, metadata: Mapping[str, Any] | None = None) -> list[str]:
    """Thread ids named by ``threads`` (exact ids or globs) and/or having a checkpoint whose
    metadata matches ``metadata``; both given: threads matching both. Sorted."""
    if not threads and not metadata:
        raise ConfigError("select the threads to edit: thread ids or patterns, and/or a metadata filter")
    named = expand_threads(saver, list(threads)) if threads else None
    if not metadata:
        return sorted(named or [])
    found: list[str] = []
    offset = 0
    while True:
        page = list_threads(saver, metadata=dict(metadata), thread_ids=named, limit=PAGE, offset=offset, official=False).threads
        found += [t.thread_id for t in page]
        if len(page) < PAGE:
            return sorted(set(found))
        offset += PAGE


def bulk_edit(
    saver: Any,
    graph: Any,
    values: Mapping[str, Any],
    *,
    threads: Sequence[str] | None = None,
    metadata: Mapping[str, Any] | None = None,
    apply: bool = False,
    as_node: str | None = None,
    mark: str | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> BulkEditReport:
    """Apply the state update ``values`` (channel → value, through the graph's reducers) to the
    threads selected by ``threads`` (ids or globs) and/or ``metadata`` (see the module doc).

    ``apply``: write (else a preview); ``as_node``: the node the update is written as (default:
    LangGraph's rule); ``mark``: the edit's name in the metadata (default ``edit_mark``);
    ``progress(done, total, thread_id)`` after each thread. One transaction a thread."""
    values = _checked(graph, values)
    mark = mark or edit_mark(values, as_node)
    g = bind_graph(graph, saver)
    ids = select_threads(saver, threads, metadata)
    report = BulkEditReport(mark, apply)
    for i, tid in enumerate(ids):
        report.threads.append(_edit_one(saver, g, tid, values, mark, apply, as_node))
        if progress:
            progress(i + 1, len(ids), tid)
    return report


def _edit_one(saver: Any, g: Any, tid: str, values: dict[str, Any], mark: str, apply: bool, as_node: str | None) -> ThreadEdit:
    if next(iter(saver.list(_config(tid), filter={MARK: mark}, limit=1)), None) is not None:
        return ThreadEdit(tid, "already applied")
    current = g.get_state(_config(tid)).values
    changes = {}
    for ch, value in values.items():
        channel = g.channels.get(ch)
        operator = getattr(channel, "operator", None)
        after = operator(current.get(ch), value) if callable(operator) and ch in current else value
        if not _same(current.get(ch), after):
            changes[ch] = summarize(current.get(ch), after, existed=ch in current)
    if not changes:
        return ThreadEdit(tid, "unchanged")
    if not apply:
        return ThreadEdit(tid, "would edit", changes)
    written = g.update_state(_config(tid), values, as_node=as_node)
    cid = written["configurable"]["checkpoint_id"]
    saver.run(annotate_op(saver.dialect, tid, "", cid, {MARK: mark}, saver.blob_codec), write=True)
    return ThreadEdit(tid, "edited", changes, cid)


def create_thread(saver: Any, graph: Any, thread_id: Any, values: Mapping[str, Any], *, as_node: str | None = None) -> str:
    """Start thread ``thread_id`` from the state ``values`` (one checkpoint, source ``update``,
    written by ``graph.update_state``); its checkpoint_id. ConfigError when the thread exists."""
    tid = thread_id_of(thread_id)
    values = _checked(graph, values)
    if saver.run(known_thread_op(saver.dialect, tid)):
        raise ConfigError(f"thread {tid!r} already exists; pick a new thread_id (or fork it: threadline fork)")
    written = bind_graph(graph, saver).update_state(_config(tid), values, as_node=as_node)
    return written["configurable"]["checkpoint_id"]
