"""``PostgresCache``: the node cache on Postgres (``threadline[postgres]``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from langgraph.cache.base import ValueT
from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg_pool import ConnectionPool

from threadline.backends.postgresconn import PostgresDriver, at_door, connect
from threadline.cache import SqlCache
from threadline.store.postgres import PoolConfig, open_args
from threadline.storage.dialect.store import POSTGRES


class PostgresCache(SqlCache[ValueT]):
    """Node cache on Postgres through psycopg 3: a ``Connection`` (autocommit) or a
    ``ConnectionPool``; ``from_conn_string(url, pool_config=…)`` opens one. The table is
    ``threadline_cache`` in the connection's current schema.

    Raises BackendError when the server cannot be reached or refuses the user.
    """

    sql = POSTGRES

    def __init__(self, conn: psycopg.Connection | ConnectionPool, *, serde: SerializerProtocol | None = None) -> None:
        self.conn = conn
        super().__init__(PostgresDriver(conn, POSTGRES), serde=serde)

    @classmethod
    @contextmanager
    def from_conn_string(
        cls, conn_string: str, *, serde: SerializerProtocol | None = None, pool_config: PoolConfig | None = None
    ) -> Iterator[PostgresCache]:
        """Connect to ``conn_string`` (a libpq URL or DSN), set up the table, close on exit."""
        resource = connect(conn_string, **open_args(pool_config))
        try:
            cache = cls(resource, serde=serde)
            cache.setup()
            yield cache
        finally:
            resource.close()

    def setup(self) -> None:
        with at_door():
            super().setup()


__all__ = ["PostgresCache"]
