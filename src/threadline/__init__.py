"""threadline: durable, branchable, inspectable state for LangGraph agents.

Public API: the savers, stores and caches, ``open_saver``/``open_store``/``open_cache``, encryption keys
(``Keyring``), and the errors.
"""

from threadline.errors import (
    BackendError,
    ConfigError,
    CorruptRowError,
    EncryptionError,
    FilterError,
    FilterTooLargeError,
    KeyTooLongError,
    NotFoundError,
    ThreadlineError,
    UnsafeOperationError,
    ValueTooLargeError,
)
from threadline.codec import BlobCodec, Keyring
from threadline.backends.postgres import AsyncPostgresSaver, PostgresSaver
from threadline.backends.sqlite import AsyncSqliteSaver, SqliteSaver
from threadline.backends import aopen_saver, open_saver
from threadline.store import AsyncPostgresStore, AsyncSqliteStore, PostgresStore, SqliteStore, aopen_store, open_store
from threadline.cache import PostgresCache, SqliteCache, open_cache

# The Redis classes load redis-py on first use, so SQLite and Postgres users never import it.
_REDIS = {"RedisSaver", "AsyncRedisSaver", "ShallowRedisSaver", "AsyncShallowRedisSaver"}


def __getattr__(name: str):
    if name in _REDIS:
        from threadline.backends import redis

        return getattr(redis, name)
    raise AttributeError(f"module 'threadline' has no attribute {name!r}")


__all__ = [
    "AsyncPostgresSaver",
    "PostgresSaver",
    "AsyncSqliteSaver",
    "SqliteSaver",
    "AsyncRedisSaver",
    "AsyncShallowRedisSaver",
    "RedisSaver",
    "ShallowRedisSaver",
    "aopen_saver",
    "open_saver",
    "AsyncPostgresStore",
    "AsyncSqliteStore",
    "PostgresStore",
    "SqliteStore",
    "aopen_store",
    "open_store",
    "PostgresCache",
    "SqliteCache",
    "open_cache",
    "BlobCodec",
    "Keyring",
    "BackendError",
    "ConfigError",
    "CorruptRowError",
    "EncryptionError",
    "FilterError",
    "FilterTooLargeError",
    "KeyTooLongError",
    "NotFoundError",
    "ThreadlineError",
    "UnsafeOperationError",
    "ValueTooLargeError",
]
