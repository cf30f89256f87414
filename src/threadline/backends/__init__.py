"""``open_saver(url)``: one entry point for every backend.

Accepted forms (the backends in ``threadline.backends.registry``):

* a plain file path (``checkpoints.db``) or ``:memory:`` → SQLite
* ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` → SQLite
* ``postgresql://user@host:port/db`` (or ``postgres://``) → Postgres

Raises ``BackendError`` for an unknown scheme or an unreachable server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from threadline.backends.registry import REGISTRY, BackendEntry, backend_of, entry_of
from threadline.saver import EngineSaver


@contextmanager
def open_saver(url: str, **options: Any) -> Iterator[EngineSaver]:
    """Open a sync saver for ``url`` (tables set up), closing it on exit; ``options`` go to its
    ``from_conn_string`` (e.g. ``ttl=``, ``retention=``)."""
    with entry_of(url).get("saver").from_conn_string(url, **options) as saver:
        yield saver


@asynccontextmanager
async def aopen_saver(url: str, **options: Any) -> AsyncIterator[EngineSaver]:
    """Open an async saver for ``url`` (tables set up), closing it on exit; ``options`` as ``open_saver``."""
    async with entry_of(url).get("async_saver").from_conn_string(url, **options) as saver:
        yield saver


__all__ = ["REGISTRY", "BackendEntry", "aopen_saver", "backend_of", "entry_of", "open_saver"]
