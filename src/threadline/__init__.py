"""threadline: durable, branchable, inspectable state for LangGraph agents.

Public API: the savers, ``open_saver``, encryption keys (``Keyring``), and the errors.
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

__all__ = [
    "AsyncPostgresSaver",
    "PostgresSaver",
    "AsyncSqliteSaver",
    "SqliteSaver",
    "aopen_saver",
    "open_saver",
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
