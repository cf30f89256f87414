"""The Cache's named statements and migrations in SQL, both backends (``threadline.cache``;
``cache/ops.py`` runs them). Written as ``statements`` are: ``?`` placeholders, each comment
giving the parameters, then (→) the columns returned.

``threadline_cache``: one row per cache entry, keyed by (ns, key): ``ns`` the namespace's JSON
array text, ``encoding`` the codec's type tag of ``value`` (bytes), ``created_at`` and
``expires_at`` (NULL: never) in seconds since the epoch.
"""

from __future__ import annotations

from threadline.storage.dialect.statements import placeholders

CACHE = "threadline_cache"

CACHE_MIGRATIONS: list[tuple[int, list[str]]] = [
    (
        1,
        [
            f"""CREATE TABLE IF NOT EXISTS {CACHE} (
                ns {{text}} NOT NULL,
                key {{text}} NOT NULL,
                encoding {{text}} NOT NULL,
                value {{blob}} NOT NULL,
                created_at {{real}} NOT NULL,
                expires_at {{real}},
                PRIMARY KEY (ns, key)
            )""",
            f"CREATE INDEX IF NOT EXISTS {CACHE}_expires_at ON {CACHE} (expires_at) WHERE expires_at IS NOT NULL",
        ],
    ),
]

# () → how many entries the cache holds; the same SQL on every backend (``store.reader.counts_op``
# runs it on a saver's dialect)
COUNT_ENTRIES = f"SELECT COUNT(*) FROM {CACHE}"


class CacheStatements:
    """Mixed into ``store.StoreSql``, the Store's and the Cache's dialect."""

    def cache_entries(self, count: int) -> str:
        """(ns, ``count`` keys, now) → ns, key, encoding, value of the entries among them not expired"""
        return (
            f"SELECT ns, key, encoding, value FROM {CACHE} WHERE ns = ? AND key IN ({placeholders(count)}) "
            "AND (expires_at IS NULL OR expires_at > ?)"
        )

    # (now): the entries expired before now
    DELETE_EXPIRED_ENTRIES = f"DELETE FROM {CACHE} WHERE expires_at < ?"
    # (ns, key, encoding, value, created_at, expires_at), many: an entry, replacing the entry of that key
    PUT_ENTRY = (
        f"INSERT INTO {CACHE} (ns, key, encoding, value, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (ns, key) DO UPDATE SET encoding = excluded.encoding, value = excluded.value, "
        "created_at = excluded.created_at, expires_at = excluded.expires_at"
    )
    # (): every entry
    CLEAR_ENTRIES = f"DELETE FROM {CACHE}"
    # (ns), many: the entries of a namespace
    CLEAR_NAMESPACE = f"DELETE FROM {CACHE} WHERE ns = ?"
