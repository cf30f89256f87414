"""``open_saver(url)``: one entry point for every backend.

Accepted forms:

* a plain file path (``checkpoints.db``) or ``:memory:`` → SQLite
* ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` → SQLite
* ``postgresql://user@host:port/db`` (or ``postgres://``) → Postgres

Raises ``BackendError`` for an unknown scheme or an unreachable server.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

from threadline.errors import BackendError
from threadline.saver import EngineSaver

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def backend_of(url: str) -> str:
    """'sqlite' or 'postgres' for a URL or path; BackendError for anything else."""
    if not isinstance(url, str) or not url:
        raise BackendError(f"database URL must be a non-empty string, got {url!r}")
    m = _SCHEME.match(url)
    if not m:
        return "sqlite"
    scheme = m.group(1).lower()
    if scheme == "sqlite":
        return "sqlite"
    if scheme in ("postgresql", "postgres") or scheme.startswith("postgresql+"):
        return "postgres"
    raise BackendError(f"unknown database URL scheme {scheme!r} in {url!r}; use a path, sqlite:///path or postgresql://")


@contextmanager
def open_saver(url: str) -> Iterator[EngineSaver]:
    """Open a sync saver for ``url`` (tables set up), closing it on exit."""
    if backend_of(url) == "sqlite":
        from threadline.backends.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(url) as saver:
            yield saver
    else:
        from threadline.backends.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(url) as saver:
            yield saver


@asynccontextmanager
async def aopen_saver(url: str) -> AsyncIterator[EngineSaver]:
    """Open an async saver for ``url`` (tables set up), closing it on exit."""
    if backend_of(url) == "sqlite":
        from threadline.backends.sqlite import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(url) as saver:
            yield saver
    else:
        from threadline.backends.postgres import AsyncPostgresSaver

        async with AsyncPostgresSaver.from_conn_string(url) as saver:
            yield saver
