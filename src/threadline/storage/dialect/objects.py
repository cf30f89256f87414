"""The named statements of offloaded values (``codec.objects``, ``lifecycle.objects``), in SQL
(both dialects). Each statement's comment gives its parameters, then (→) the columns of the rows
it returns. Redis does not implement them (``offloads`` is False there): offload to an object
store is for SQLite and Postgres.
"""

from __future__ import annotations

# The LIKE pattern of an offloaded value's stored type: ``<tag>+obj+sum`` / ``<tag>+obj+gcm``.
OFFLOADED_TYPE = "%+obj+%"


class ObjectStatements:
    """Mixed into ``Dialect``."""

    # Whether this backend can offload values to an object store (its object sweep needs the
    # statements below); False on Redis.
    offloads = True

    # (type pattern) → thread_id, checkpoint_ns, channel, version, base_version, type, blob of the
    # blob rows whose value is offloaded (their bytes: the sealed reference)
    OFFLOADED_BLOBS = (
        "SELECT thread_id, checkpoint_ns, channel, version, base_version, type, blob FROM threadline_blobs WHERE type LIKE ?"
    )
    # (type pattern) → thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob of the
    # pending writes whose value is offloaded
    OFFLOADED_WRITES = (
        "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob FROM threadline_writes WHERE type LIKE ?"
    )

    # --- the cold tier (``transfer.cold``; table threadline_cold, migration 12) ---------------

    # (thread_id, object, checkpoints, bytes, tiered_at): a cold thread's stub
    INSERT_COLD = "INSERT INTO threadline_cold (thread_id, object, checkpoints, bytes, tiered_at) VALUES (?, ?, ?, ?, ?)"
    # (thread_id, thread_id) → (1 when the thread is cold, 1 when it has a checkpoint), NULL for no
    COLD_STATE = (
        "SELECT (SELECT 1 FROM threadline_cold WHERE thread_id = ?), "
        "(SELECT 1 FROM threadline_checkpoints WHERE thread_id = ? LIMIT 1)"
    )
    # (thread_id) → object of its archive: the stub deleted, so one transaction restores it
    TAKE_COLD = "DELETE FROM threadline_cold WHERE thread_id = ? RETURNING object"
    # () → thread_id, object of every cold thread
    COLD_OBJECTS = "SELECT thread_id, object FROM threadline_cold"
    # (updated before, accessed before or never, limit) → thread_id, checkpoint_count, bytes of the
    # threads idle since then, least recently updated first
    IDLE_THREADS = (
        "SELECT thread_id, checkpoint_count, bytes FROM threadline_threads "
        "WHERE updated_at <= ? AND (accessed_at IS NULL OR accessed_at <= ?) ORDER BY updated_at, thread_id LIMIT ?"
    )
