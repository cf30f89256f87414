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
