"""threadline: durable, branchable, inspectable state for LangGraph agents.

Public API: the savers, ``open_saver``, and the errors.
"""

from threadline.errors import (
    BackendError,
    ConfigError,
    CorruptRowError,
    FilterError,
    NotFoundError,
    ThreadlineError,
    UnsafeOperationError,
)
from threadline.sqlite import AsyncSqliteSaver, SqliteSaver

__all__ = [
    "AsyncSqliteSaver",
    "SqliteSaver",
    "BackendError",
    "ConfigError",
    "CorruptRowError",
    "FilterError",
    "NotFoundError",
    "ThreadlineError",
    "UnsafeOperationError",
]
