"""threadline: durable, branchable, inspectable state for LangGraph agents.

Public API: the savers, stores and caches, ``open_saver``/``open_store``/``open_cache``, encryption keys
(``Keyring``), and the errors. A feature of an extra that is not installed raises ``MissingExtraError``
naming its ``pip install 'threadline[…]'`` (``threadline.extras``).
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
    MissingExtraError,
    NotFoundError,
    ThreadBusyError,
    SerializationError,
    ThreadlineError,
    UnsafeOperationError,
    ValueTooLargeError,
)
from threadline.lazy import lazy_names

# Every class and opener loads on first use: a SQLite user never imports psycopg or redis-py,
# and ``import threadline`` (the CLI's --help) imports no LangGraph.
_LAZY = {
    **dict.fromkeys(("BlobCodec", "Keyring"), "threadline.codec"),
    **dict.fromkeys(("open_saver", "aopen_saver"), "threadline.backends"),
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
    "MissingExtraError",
    "NotFoundError",
    "ThreadBusyError",
    "SerializationError",
    "ThreadlineError",
    "UnsafeOperationError",
    "ValueTooLargeError",
]
