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
    LeaseLostError,
    NotFoundError,
    ThreadBusyError,
    SerializationError,
    ThreadlineError,
    UnsafeOperationError,
    ValueTooLargeError,
)
from threadline.codec import BlobCodec, Keyring
from threadline.backends import aopen_saver, open_saver
from threadline.lazy import lazy_names

# Each backend's classes load on first use: a SQLite user never imports psycopg or redis-py
# (a cold start pays only for the driver it uses).
_LAZY = {
    **dict.fromkeys(("SqliteSaver", "AsyncSqliteSaver"), "threadline.backends.sqlite"),
    **dict.fromkeys(("InMemorySaver", "MemorySaver"), "threadline.backends.memory"),
    **dict.fromkeys(("PostgresSaver", "AsyncPostgresSaver"), "threadline.backends.postgres"),
    **dict.fromkeys(("RedisSaver", "AsyncRedisSaver", "ShallowRedisSaver", "AsyncShallowRedisSaver"), "threadline.backends.redis"),
    **dict.fromkeys(("SqliteStore", "AsyncSqliteStore", "PostgresStore", "AsyncPostgresStore", "open_store", "aopen_store"), "threadline.store"),
    **dict.fromkeys(("SqliteCache", "PostgresCache", "open_cache"), "threadline.cache"),
    "__version__": "threadline._version",
}


__getattr__ = lazy_names(globals(), _LAZY)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "AsyncPostgresSaver",
    "PostgresSaver",
    "AsyncSqliteSaver",
    "SqliteSaver",
    "InMemorySaver",
    "MemorySaver",
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
    "LeaseLostError",
    "NotFoundError",
    "ThreadBusyError",
    "SerializationError",
    "ThreadlineError",
    "UnsafeOperationError",
    "ValueTooLargeError",
]
