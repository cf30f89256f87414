"""The named statements of offloaded values (``codec.objects``, ``lifecycle.objects``), in SQL
(both dialects). Each statement's comment gives its parameters, then (→) the columns of the rows
it returns. Redis does not implement them (``offloads`` is False there): offload to an object
store is for SQLite and Postgres.
"""

from __future__ import annotations

from threadline.storage.dialect.lifecycle import AFTER, EXPIRED

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
    # (type pattern, thread_id) → the same columns, of one thread's rows (``lifecycle.erase``)
    OFFLOADED_BLOBS_OF = OFFLOADED_BLOBS + " AND thread_id = ?"
    OFFLOADED_WRITES_OF = OFFLOADED_WRITES + " AND thread_id = ?"

    # --- the cold tier (``lifecycle.cold``; table threadline_cold, migration 12) ---------------

    # (thread_id, object, checkpoints, bytes, tiered_at, created_at, updated_at, accessed_at, ttl_minutes, default_ttl):
    # a cold thread's stub (the last five copied from its ``threads`` row, migrations 13 and 15)
    INSERT_COLD = (
        "INSERT INTO threadline_cold (thread_id, object, checkpoints, bytes, tiered_at, created_at, updated_at, accessed_at, ttl_minutes, "
        "default_ttl) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )
    # () → one row when any thread is cold (the listings then take the stubs in, ``read.threads``)
    ANY_COLD = "SELECT 1 FROM threadline_cold LIMIT 1"
    # (thread_id, thread_id) → (1 when the thread is cold, 1 when it has a checkpoint), NULL for no
    COLD_STATE = (
        "SELECT (SELECT 1 FROM threadline_cold WHERE thread_id = ?), "
        "(SELECT 1 FROM threadline_checkpoints WHERE thread_id = ? LIMIT 1)"
    )
    # (thread_id) → object of its archive: the stub deleted, so one transaction restores it
    TAKE_COLD = "DELETE FROM threadline_cold WHERE thread_id = ? RETURNING object"
    # () → thread_id, object of every cold thread
    COLD_OBJECTS = "SELECT thread_id, object FROM threadline_cold"
    # (thread_id) → object of the thread's archive, when it is cold
    COLD_OBJECT = "SELECT object FROM threadline_cold WHERE thread_id = ?"
    # () → how many threads are cold, the bytes their rows held
    COLD_TOTALS = "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM threadline_cold"
    # TTL of cold threads (``threadline.ttl`` on the stub's copy of its ``threads`` row; the sweeper):
    # (the sweep's default TTL minutes or NULL, the same, now, after updated_at, the same, after thread_id, limit) →
    # thread_id, updated_at, checkpoints of expired cold threads after that one, least recently updated first
    EXPIRED_COLD = f"SELECT thread_id, updated_at, checkpoints FROM threadline_cold WHERE {EXPIRED} AND {AFTER} ORDER BY updated_at, thread_id LIMIT ?"
    # (thread_id, the sweep's default TTL minutes or NULL, the same, now) → checkpoints of the cold thread when it
    # was still expired: its stub deleted (its archive, no longer named, goes with the object sweep)
    EXPIRE_COLD = f"DELETE FROM threadline_cold WHERE thread_id = ? AND {EXPIRED} RETURNING checkpoints"
    # (updated before, accessed before or never, limit) → thread_id, checkpoint_count, bytes of the
    # threads idle since then, least recently updated first
    IDLE_THREADS = (
        "SELECT thread_id, checkpoint_count, bytes FROM threadline_threads "
        "WHERE updated_at <= ? AND (accessed_at IS NULL OR accessed_at <= ?) ORDER BY updated_at, thread_id LIMIT ?"
    )
