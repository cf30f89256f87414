"""Read models over a threadline database: threads, the checkpoint tree, the state at
a checkpoint, diffs, the audit trail, the latest value of a channel, and statistics.

Every read model is a sans-IO operation (a generator yielding ``storage.ops.Q``) plus a
sync convenience wrapper taking a saver::

    from threadline import open_saver
    from threadline import read

    with open_saver("threadline-demo.db") as saver:
        page = read.list_threads(saver, limit=20)          # sync wrapper
        tree = read.thread_history(saver, "thread-1")
    # async: await saver.arun(read.threads_op(saver.dialect, limit=20))

Conventions (all functions):

* times are seconds since the epoch (UTC, ``float``); sizes are bytes as stored
  (after threadline's codec: compressed/delta-encoded blobs count as stored);
* the *head* of a thread is its latest checkpoint (largest checkpoint_id) in the
  root namespace ``checkpoint_ns == ""``, exactly as LangGraph's ``get_tuple``
  without a checkpoint_id picks it — so after a rollback the head is the rollback
  checkpoint, not the newest blob version (seed 000's ``MAX(version)`` shortcut is
  wrong after a rollback);
* channel values are only decoded when a function returns them (``state_at``,
  ``diff``, ``latest_values``); everything else reads checkpoint JSON (without
  values), column sizes and write metadata;
* every result type has ``to_json()`` returning plain JSON-able data (values
  pass through ``jsonable``).

Errors: ``NotFoundError`` for an unknown thread or checkpoint, ``ConfigError`` for
a malformed id, ``CorruptRowError`` for a stored row that cannot be decoded — except in the
listings (``threads``, ``search``, ``inbox``, ``stats``' largest threads), where a thread that
cannot be read is listed with its ``Damage`` and the others as always.

The read models live one per module, each importing only ``common`` (the shared
helpers) and, for ``stats``, ``threads``, for ``threads``, ``official`` (the official
savers' threads not adopted yet, which the listings show too): ``threads`` (the threads listing),
``status`` (a thread's status), ``records`` (a thread's own metadata), ``search`` (threads
searched as the Agent Server searches them), ``tree`` (the checkpoint tree), ``channel`` (one
channel through time), ``tags`` (tags and pins as stored), ``state`` (the state at a checkpoint), ``diff``,
``audit`` (the audit trail and task statistics), ``latest`` (the latest value of a
channel) and ``stats``. This package re-exports their names, so ``history.X`` and
``from threadline.read import X`` work as before.
"""

from __future__ import annotations

from threadline.read.audit import TaskStat, TaskStats, WriteInfo, audit, audit_op, task_stats, task_stats_op
from threadline.read.common import (
    ERROR,
    INTERRUPT,
    NULL_TASK_ID,
    RESUME,
    SPECIAL_WRITE_CHANNELS,
    TASKS,
    Damage,
    bind_graph,
    checkpoint_row_op,
    head_op,
    is_internal_channel,
    iso,
    jsonable,
    load_channels_op,
    load_graph,
    node_of_task_path,
    parse_duration,
)
from threadline.read.channel import ChannelHistory, ChannelVersion, channel_history, channel_history_op
from threadline.read.diff import StateDiff, diff, diff_op, diff_values
from threadline.read.forks import ConcurrentFork, concurrent_forks
from threadline.read.latest import LatestValue, latest_op, latest_values
from threadline.read.state import PendingWriteView, StateView, next_nodes, state_at, stored_state_op
from threadline.read.stats import Stats, stats, stats_op
from threadline.read.threads import ThreadInfo, ThreadPage, all_thread_ids_op, list_threads, threads_op
from threadline.read.records import ThreadRecord, thread_record, thread_record_op
from threadline.read.inbox import InboxItem, inbox, inbox_count, inbox_op
from threadline.read.search import acount_threads, asearch_threads, count_threads, search_op, search_threads
from threadline.read.status import STATUSES, ThreadStatus, current_status_op, thread_status, thread_status_op
from threadline.read.tree import CheckpointNode, ThreadHistory, history_op, thread_history

__all__ = [
    "Damage",
    "ChannelHistory",
    "ChannelVersion",
    "STATUSES",
    "ThreadRecord",
    "ThreadStatus",
    "acount_threads",
    "asearch_threads",
    "InboxItem",
    "inbox",
    "inbox_count",
    "inbox_op",
    "count_threads",
    "current_status_op",
    "search_op",
    "search_threads",
    "thread_record",
    "thread_record_op",
    "thread_status",
    "thread_status_op",
    "CheckpointNode",
    "ConcurrentFork",
    "concurrent_forks",
    "LatestValue",
    "PendingWriteView",
    "StateDiff",
    "StateView",
    "Stats",
    "TaskStat",
    "TaskStats",
    "ThreadHistory",
    "ThreadInfo",
    "ThreadPage",
    "WriteInfo",
    "audit",
    "audit_op",
    "channel_history",
    "channel_history_op",
    "diff",
    "diff_op",
    "diff_values",
    "history_op",
    "jsonable",
    "latest_op",
    "latest_values",
    "list_threads",
    "load_channels_op",
    "load_graph",
    "next_nodes",
    "node_of_task_path",
    "parse_duration",
    "state_at",
    "stats",
    "stats_op",
    "stored_state_op",
    "task_stats",
    "task_stats_op",
    "thread_history",
    "threads_op",
]
