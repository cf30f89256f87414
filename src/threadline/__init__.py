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

__all__ = [
    "AsyncPostgresSaver",
    "PostgresSaver",
    "AsyncSqliteSaver",
    "SqliteSaver",
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
