"""The named statements of tags and pins (``threadline.lifecycle.tags``, ``threadline.read.tags``),
in SQL for both dialects (tables of migration 10). Each statement's comment gives its parameters,
then (→) the columns of the rows it returns; ``storage/redis/tags.py`` implements the same names.
"""

from __future__ import annotations


class TagStatements:
    """Mixed into ``Dialect``."""

    # Whether tags live in a table a database may lack (one set up before migration 10, opened
    # read-only): readers then check ``tables_sql`` first. False where they always can be read.
    tags_need_table = True

    # (thread_id) → name, checkpoint_ns, checkpoint_id, created_at of the thread's tags, by name
    THREAD_TAGS = "SELECT name, checkpoint_ns, checkpoint_id, created_at FROM threadline_tags WHERE thread_id = ? ORDER BY name"
    # () → thread_id, name, checkpoint_ns, checkpoint_id, created_at of every tag, by thread and name
    EVERY_TAG = "SELECT thread_id, name, checkpoint_ns, checkpoint_id, created_at FROM threadline_tags ORDER BY thread_id, name"
    # (thread_id, name) → checkpoint_ns, checkpoint_id the tag names (no row: no such tag)
    TAG_NAMED = "SELECT checkpoint_ns, checkpoint_id FROM threadline_tags WHERE thread_id = ? AND name = ?"
    # (thread_id, name, checkpoint_ns, checkpoint_id, created_at) → name, when the tag was new (no row: it exists)
    INSERT_TAG = (
        "INSERT INTO threadline_tags (thread_id, name, checkpoint_ns, checkpoint_id, created_at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (thread_id, name) DO NOTHING RETURNING name"
    )
    # (thread_id, name) → checkpoint_ns, checkpoint_id of the tag removed (no row: there was none)
    DELETE_TAG = "DELETE FROM threadline_tags WHERE thread_id = ? AND name = ? RETURNING checkpoint_ns, checkpoint_id"
    # (thread_id, checkpoint_ns, checkpoint_id): the tags of a checkpoint that is deleted
    DELETE_CHECKPOINT_TAGS = "DELETE FROM threadline_tags WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
    # (thread_id, pinned_at): the thread pinned (a pinned one keeps its first pinned_at)
    PIN_THREAD = "INSERT INTO threadline_pins (thread_id, pinned_at) VALUES (?, ?) ON CONFLICT (thread_id) DO NOTHING"
    # (thread_id) → thread_id, when it was pinned (now it is not)
    UNPIN_THREAD = "DELETE FROM threadline_pins WHERE thread_id = ? RETURNING thread_id"
    # (thread_id) → pinned_at (no row: not pinned)
    THREAD_PIN = "SELECT pinned_at FROM threadline_pins WHERE thread_id = ?"
    # () → thread_id, pinned_at of every pinned thread, by thread_id
    EVERY_PIN = "SELECT thread_id, pinned_at FROM threadline_pins ORDER BY thread_id"
    # (thread_id) each: what deleting a thread deletes of its tags and pin
    DELETE_THREAD_TAGS = tuple(f"DELETE FROM threadline_{name} WHERE thread_id = ?" for name in ("tags", "pins"))
