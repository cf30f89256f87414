"""The named statements of blob rows (``threadline_blobs``: one row per (thread_id, checkpoint_ns,
channel, version) actually written, immutable), in the standard SQL both backends accept; written
and documented as ``statements`` (``?`` placeholders; each comment gives the parameters, then (→)
the columns returned). ``storage/redis/blobs.py`` implements the same names on Redis.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from threadline.storage.dialect.statements import BLOB_KEY, read_values, values_list
from threadline.storage.rows import BLOB_COLUMNS

_INSERT_BLOBS = f"INSERT INTO threadline_blobs ({BLOB_COLUMNS}) "


class BlobStatements:
    """Mixed into ``Dialect`` (after ``Statements``, whose ``join_keys``, ``probe`` and ``value_read`` they use)."""


    # (thread_id, checkpoint_ns, channel, version, type, blob, base_version): insert-or-ignore (blobs are immutable)
    INSERT_BLOB = _INSERT_BLOBS + "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
    # (thread_id) → BLOB_COLUMNS of every blob of a thread
    THREAD_BLOBS = f"SELECT {BLOB_COLUMNS} FROM threadline_blobs WHERE thread_id = ?"
    # (type, blob, thread_id, checkpoint_ns, channel, version): a value re-sealed in place (``rekey``)
    SET_BLOB_VALUE = "UPDATE threadline_blobs SET type = ?, blob = ? WHERE thread_id = ? AND checkpoint_ns = ? AND channel = ? AND version = ?"
    # (thread_id, checkpoint_ns, channel, version)
    DELETE_BLOB = "DELETE FROM threadline_blobs WHERE thread_id = ? AND checkpoint_ns = ? AND channel = ? AND version = ?"
    # (thread_id) → checkpoint_ns, channel, version, base_version
    THREAD_BLOB_BASES = "SELECT checkpoint_ns, channel, version, base_version FROM threadline_blobs WHERE thread_id = ?"
    # (thread_id, LIKE pattern) → BLOB_COLUMNS of the thread's blobs whose type matches (``codec.DELTA_REF`` + "%")
    THREAD_BLOBS_LIKE = f"SELECT {BLOB_COLUMNS} FROM threadline_blobs WHERE thread_id = ? AND type LIKE ?"
    # (thread_id, type) → checkpoint_ns, channel, version of the blobs not of that type (``codec.EMPTY``: those with a value)
    THREAD_BLOBS_NOT_OF_TYPE = "SELECT checkpoint_ns, channel, version FROM threadline_blobs WHERE thread_id = ? AND type <> ?"

    def insert_blob_guarded(self) -> str:
        """Insert-or-ignore of one blob row: (the INSERT_BLOB parameters, then the type and stored size
        its base row must have, NULL for a snapshot). A delta is inserted only while its base row still
        has that type and size, so a stale cache entry can never leave a delta on a base that changed."""
        return (
            _INSERT_BLOBS + f"SELECT column1, column2, column3, column4, column5, CAST(column6 AS {self.types['blob']}), column7 "
            f"FROM ({values_list(9, 1)}) v "
            "WHERE column7 IS NULL OR EXISTS (SELECT 1 FROM threadline_blobs b WHERE b.thread_id = v.column1 AND b.checkpoint_ns = v.column2 "
            "AND b.channel = v.column3 AND b.version = v.column7 AND b.type = v.column8 "
            f"AND {self.bytes_of('b.blob', 'blob')} = CAST(v.column9 AS {self.types['int']})) "
            "ON CONFLICT DO NOTHING"
        )

    # whether a read at the start of a write transaction still holds at its commit (SQLite: the
    # transaction holds the database's one write lock from its first statement). ``put`` then reads
    # its guards once (``put_guards``) and writes with plain inserts: an ``INSERT … SELECT`` whose
    # guard reads the table it writes makes SQLite run the SELECT into a temporary table first.
    checks_hold = False

    @lru_cache(maxsize=64)
    def put_guards(self, deltas: int) -> str:
        """A put's guards in one read (a dialect whose ``checks_hold``): (the checkpoint_id of the
        parent a new checkpoint row needs stored (NULL: none), thread_id, checkpoint_ns, then ``deltas``
        × (channel, base_version, the type and stored size the base row must have)) → one row:
        whether that parent is stored (1 when none is needed), then whether each delta's base row is
        stored so (``insert_blob_guarded``'s and ``insert_checkpoint``'s guards)."""
        bases = [
            f"EXISTS (SELECT 1 FROM threadline_blobs b WHERE b.thread_id = ?2 AND b.checkpoint_ns = ?3 AND b.channel = ?{4 + 4 * i} "
            f"AND b.version = ?{5 + 4 * i} AND b.type = ?{6 + 4 * i} AND {self.bytes_of('b.blob', 'blob')} = ?{7 + 4 * i})"
            for i in range(deltas)
        ]
        parent = "?1 IS NULL OR EXISTS (SELECT 1 FROM threadline_checkpoints p WHERE p.thread_id = ?2 AND p.checkpoint_ns = ?3 AND p.checkpoint_id = ?1)"
        return "SELECT " + ", ".join([parent, *bases])

    def count_stored(self, count: int) -> str:
        """A scalar subquery: how many of ``count`` (channel, version, type, stored size) rows of one
        (thread_id, checkpoint_ns) are stored exactly so. (the rows, flattened, then thread_id, checkpoint_ns)"""
        return (
            f"(SELECT COUNT(*) FROM ({values_list(4, count)}) k JOIN threadline_blobs b ON b.thread_id = ? AND b.checkpoint_ns = ? "
            "AND b.channel = k.column1 AND b.version = k.column2 AND b.type = k.column3 "
            f"AND {self.bytes_of('b.blob', 'blob')} = CAST(k.column4 AS {self.types['int']}))"
        )

    def delete_by_keys(self, table: str, key: Sequence[str]) -> str | None:
        """One statement deleting the rows of ``table`` whose ``key`` columns (text) match one
        of a list of keys; its parameters are one list per key column. None where the
        dialect deletes a list of keys one statement each (``executemany``: SQLite runs them
        in process, a client–server backend would pay a round trip each)."""
        return None

    def blob_sizes_by_keys(self, count: int) -> str:
        """(``count`` blob keys, flattened) → channel, version, type, stored bytes"""
        return self.join_keys("threadline_blobs", BLOB_KEY, count, f"t.channel, t.version, t.type, {self.bytes_of('t.blob', 'blob')}")

    def blobs_with_value(self, count: int) -> str:
        """(``count`` blob keys, flattened, then ``codec.EMPTY``) → channel, version of those holding a value"""
        return self.join_keys("threadline_blobs", BLOB_KEY, count, "t.channel, t.version") + " WHERE t.type <> ?"

    @lru_cache(maxsize=512)
    def blob_chains(self, count: int) -> str:
        """The blob rows of ``count`` keys and of every version their deltas are built on.
        (``count`` blob keys, flattened) → BLOB_COLUMNS

        A recursive CTE follows ``base_version`` (``UNION`` returns each row once however
        many keys share a chain). Each step looks the next base up by a correlated
        subquery, which both databases answer with one primary-key probe (a join there
        lets Postgres plan a scan of ``blobs`` per step); the keys' rows and the chain's are
        read by ``probe``."""
        on = " AND ".join(f"t.{col} = k.column{i + 1}" for i, col in enumerate(BLOB_KEY))
        return (
            "WITH RECURSIVE chain(thread_id, checkpoint_ns, channel, version, base_version) AS ("
            f" SELECT t.thread_id, t.checkpoint_ns, t.channel, t.version, t.base_version FROM ({values_list(4, count)}) k"
            f" {self.probe('threadline_blobs', on)}"
            " UNION"
            " SELECT c.thread_id, c.checkpoint_ns, c.channel, c.base_version,"
            " (SELECT b.base_version FROM threadline_blobs b WHERE b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns"
            " AND b.channel = c.channel AND b.version = c.base_version)"
            " FROM chain c WHERE c.base_version IS NOT NULL"
            f") SELECT {read_values(BLOB_COLUMNS, self.value_read, 't')} FROM chain c"
            " " + self.probe("threadline_blobs", "t.thread_id = c.thread_id AND t.checkpoint_ns = c.checkpoint_ns"
            " AND t.channel = c.channel AND t.version = c.version")
        )

    def thread_blob_sizes(self) -> str:
        """(thread_id) → checkpoint_ns, channel, version, type, base_version, stored bytes"""
        return f"SELECT checkpoint_ns, channel, version, type, base_version, {self.bytes_of('blob', 'blob')} FROM threadline_blobs WHERE thread_id = ?"
