"""The named statements of thread records (``threadline.lifecycle.records``, ``read.search``) in
SQL, both dialects. ``storage/redis/records.py`` implements the same names on Redis.

A record is one row of ``threadline_thread_records`` (schema migration 7): the thread's own
metadata (a JSON object) and its ``archived`` flag (0 or 1), with when it was first set and
last changed (epoch seconds).
"""

from __future__ import annotations


class RecordsStatements:
    """Mixed into ``Dialect``."""

    # (thread_id) → metadata (JSON text), archived, created_at, updated_at; no row without a record
    THREAD_RECORD = "SELECT CAST(metadata AS TEXT), archived, created_at, updated_at FROM threadline_thread_records WHERE thread_id = ?"
    # (thread_id, metadata JSON, archived 0/1, now, now): the record written whole (created_at kept when it exists)
    PUT_THREAD_RECORD = (
        "INSERT INTO threadline_thread_records (thread_id, metadata, archived, created_at, updated_at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (thread_id) DO UPDATE SET metadata = excluded.metadata, archived = excluded.archived, updated_at = excluded.updated_at"
    )
