"""Lifecycle operations: rollback as a new branch, fork to a new thread, delete one
checkpoint, retention (prune), consistency checks (fsck) and recovery (rebuild).

Like ``threadline.read``, each operation is a sans-IO generator (``*_op``) that
a saver runs in ONE transaction (``saver.run(op, write=True)`` /
``await saver.arun(op, write=True)``), plus a sync wrapper taking a saver.
Nothing here deletes what a kept checkpoint needs:

* a checkpoint is read from its row + the blobs its ``channel_versions`` name
  (+ its pending writes); blobs are shared by reference across checkpoints and
  branches, so deleting checkpoints only deletes blobs no remaining checkpoint
  references (``ops.gc_blobs``, which also keeps delta bases);
* a LangGraph ``DeltaChannel`` value is rebuilt from the writes of a
  checkpoint's ancestors back to the nearest stored snapshot (metadata
  ``counters_since_delta_snapshot``); those ancestors are never deleted while a
  kept checkpoint needs them.

Both rules are storage's (``threadline.storage.liveness``), the same that
``prune``, ``gc_blobs`` and ``get_delta_channel_history`` apply.

Errors: ``NotFoundError`` (unknown thread/checkpoint), ``UnsafeOperationError``
(refused: the operation would break or overwrite something kept),
``ConfigError`` (malformed ids or options), ``CorruptRowError`` (unreadable row).
``rekey`` re-seals a database under the saver's encryption key (``rekey``).

The code is split by operation family, each module depending only on ``thread``
(and ``retention`` on ``delete``): ``thread`` (the in-memory ``_Thread`` model
the plans read, asking ``storage.liveness``) ← ``branch`` (rollback,
fork), ``delete`` (delete one checkpoint; plans) ← ``retention`` (policies,
prune), ``fsck`` (checks, repairs); ``rebuild`` (recovery from writes) stands
alone. ``tags`` (tags and pins, what they protect; ``delete`` and ``retention``
ask it) stands below ``delete``. Three modules write through the application's
compiled graph (``graph.update_state``) rather than rows: ``merge`` (a branch into
another, through the reducers), ``bulk`` (one state edit to many threads, a thread
from a JSON state), both marking their checkpoints with ``annotate``. This package
re-exports the public names, so ``lifecycle.X`` works as before.
"""

from __future__ import annotations

from threadline.lifecycle.branch import BranchResult, fork, fork_op, rollback, rollback_op
from threadline.lifecycle.delete import DELETE_MODES, DeletePlan, delete_checkpoint, delete_checkpoint_op
from threadline.lifecycle.fsck import REPAIRS, Finding, FsckReport, every_thread_id_op, fsck, fsck_thread_op
from threadline.lifecycle.heads import FormatReport, HeadVerificationError, migrate_format, write_heads_op
from threadline.lifecycle.rebuild import RebuildResult, rebuild, recompute_values
from threadline.lifecycle.records import update_thread, update_thread_op
from threadline.lifecycle.rekey import RekeyReport, rekey, rekey_thread_op
from threadline.lifecycle.retention import PruneReport, RetentionPolicy, prune, prune_thread_op

__all__ = [
    "update_thread",
    "update_thread_op",
    "BranchResult",
    "DELETE_MODES",
    "DeletePlan",
    "Finding",
    "FormatReport",
    "FsckReport",
    "HeadVerificationError",
    "PruneReport",
    "REPAIRS",
    "RebuildResult",
    "RekeyReport",
    "RetentionPolicy",
    "delete_checkpoint",
    "delete_checkpoint_op",
    "every_thread_id_op",
    "fork",
    "fork_op",
    "fsck",
    "fsck_thread_op",
    "migrate_format",
    "write_heads_op",
    "prune",
    "prune_thread_op",
    "recompute_values",
    "rebuild",
    "rekey",
    "rekey_thread_op",
    "rollback",
    "rollback_op",
]
