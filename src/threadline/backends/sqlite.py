"""SQLite savers: ``SqliteSaver`` (sqlite3) and ``AsyncSqliteSaver`` (aiosqlite).

Thin shells over the shared storage operations: they open the connection and wrap each
operation in one transaction — ``BEGIN IMMEDIATE`` for writes so concurrent processes queue
on the busy timeout instead of failing to upgrade a read lock — and hand a cursor to the one
statement loop (``threadline.storage.runner``).

A connection the caller passes in is used as it is: its ``isolation_level`` and
pragmas are never changed (the saver issues its own ``BEGIN``/``COMMIT``). A
connection ``from_conn_string`` opens is set up for concurrent use (WAL, a 30 s
busy timeout) and is as durable as the official savers' (``synchronous=FULL``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

from threadline.backends.sqliteconn import (AUTO_VACUUM, PAGE_COUNT, WAL, AsyncSqliteDriver, SqliteDriver, aconnect, connect,
                                            door_error, file_name, open_file, transact)
from threadline.lazy import LazyAttribute
from threadline.saver import AsyncShell, SyncShell

if TYPE_CHECKING:
    from langgraph.checkpoint.serde.base import SerializerProtocol

    from threadline.storage import ops


class _SqliteSaverParts:
    """The constructor both SQLite savers share (the official savers' signature): ``conn`` a
    ``sqlite3`` or ``aiosqlite`` connection as the saver; ``cache_max_bytes`` bounds the
    value cache (``EngineSaver``)."""

    _driver_class: type[SqliteDriver] | type[AsyncSqliteDriver]
    dialect = LazyAttribute("threadline.storage.dialect:SQLITE")  # loaded with the first saver (issue 44)
    # the connection came from ``connect``/``aconnect`` (``from_conn_string``): its file is set up
    # already (WAL, auto-vacuum); a connection the caller opened gets them in ``setup``
    _file_ready = False

    def __init__(
        self, conn: Any, *, serde: SerializerProtocol | None = None, adopt: bool | None = None, ttl: Any = None, retention: Any = None,
        cache_max_bytes: int | None = None,
    ) -> None:
        super().__init__(serde=serde, adopt=adopt, ttl=ttl, retention=retention, cache_max_bytes=cache_max_bytes)  # type: ignore[call-arg]
        self._driver = self._driver_class(conn, self.dialect)
        self.conn, self.lock = conn, self._driver.lock


class SqliteConnectionSaver(_SqliteSaverParts, SyncShell):
    """A sync saver on one ``sqlite3`` connection: ``setup``, ``cursor`` and the transaction
    shell ``SqliteSaver`` (a file) and ``InMemorySaver`` (a private in-memory database) share."""

    _driver_class = SqliteDriver

    def setup(self) -> None:
        if self.is_setup:  # done on this connection (as the official SqliteSaver's): from_conn_string sets up
            return
        with self.lock:
            try:
                if not self._file_ready and not self.conn.in_transaction:
                    # properties of the file (WAL as the official saver sets it); auto-vacuum only
                    # on a new file (an existing one converts with `threadline vacuum --full`)
                    if self.conn.execute(PAGE_COUNT).fetchone()[0] == 0:
                        self.conn.execute(AUTO_VACUUM)
                    self.conn.execute(WAL)
                super().setup()
            except sqlite3.Error as exc:
                raise door_error(exc, file_name(self.conn)) from exc

    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        """A cursor on the saver's connection, holding its lock (as the official
        ``SqliteSaver.cursor``); commits on exit when ``transaction``."""
        with self.lock:
            if not self.is_setup:
                self.setup()
            cur = self.conn.cursor()
            try:
                yield cur
            finally:
                if transaction and self.conn.in_transaction:
                    self.conn.commit()
                cur.close()

    def _run(self, op: ops.Op, *, write: bool) -> Any:
        # every saver call comes here: the setup check and the driver's transaction in one step
        # under the connection's lock (the shells' ``_run`` → ``_transaction`` → ``driver.run``)
        with self.lock:
            if not self.is_setup:
                self.setup()
            return transact(self.conn, op, self.dialect, write)

    def _transaction(self, op: ops.Op, write: bool) -> Any:
        return self._driver.run(op, write=write)


class SqliteSaver(SqliteConnectionSaver):
    """Checkpoint saver on a SQLite file through the standard ``sqlite3`` module.

    Same constructor and ``from_conn_string`` as LangGraph's official
    ``langgraph.checkpoint.sqlite.SqliteSaver``. Safe to share between threads
    (LangGraph's ``durability="async"`` puts run in a background thread): one lock
    serializes use of the connection. Several processes may share one file.

    ``adopt``: whether to adopt threads of an official ``SqliteSaver`` in the same file
    (see ``EngineSaver`` and ``threadline.storage.adopt``).

    Usage::

        with SqliteSaver.from_conn_string("checkpoints.db") as saver:
            graph = builder.compile(checkpointer=saver)

    Raises BackendError (at open/setup) for a file that is not a SQLite database, a
    read-only or unopenable path; SchemaError for a schema of a newer release.
    """

    @classmethod
    @contextmanager
    def from_conn_string(
        cls, conn_string: str, *, serde: SerializerProtocol | None = None, adopt: bool | None = None, ttl: Any = None,
        retention: Any = None, cache_max_bytes: int | None = None,
    ) -> Iterator[SqliteSaver]:
        """Open (creating if needed) a SQLite database — a path, ``":memory:"`` or
        ``sqlite:///path`` — and set up threadline's tables. With a ``ttl`` naming
        ``sweep_interval_minutes``, the background sweeper runs until the block ends.
        ``cache_max_bytes``: the bound of the saver's value cache (default 4 MiB; ``EngineSaver``)."""
        conn = connect(conn_string)
        try:
            saver = cls(conn, serde=serde, adopt=adopt, ttl=ttl, retention=retention, cache_max_bytes=cache_max_bytes)
            saver._file_ready = True
            saver.setup()
            with saver._sweeping():
                yield saver
        finally:
            conn.close()


@contextmanager
def open_read_only(url: str, serde: Any = None) -> Iterator[tuple[SqliteSaver, ops.SchemaState]]:
    """A ``SqliteSaver`` on an existing file opened read-only (``sqliteconn.open_file``), never
    set up, and what the file holds. NotADatabaseError for a missing file, a directory or a
    non-SQLite file."""
    with open_file(url) as (driver, state):
        yield SqliteSaver(driver.conn, serde=serde, adopt=False), state


class AsyncSqliteSaver(_SqliteSaverParts, AsyncShell):
    """Checkpoint saver on a SQLite file through ``aiosqlite``, for ``graph.ainvoke``/``astream``.

    Same constructor and ``from_conn_string`` as LangGraph's official
    ``langgraph.checkpoint.sqlite.aio.AsyncSqliteSaver``; ``setup`` is ``async``.

    Usage::

        async with AsyncSqliteSaver.from_conn_string("checkpoints.db") as saver:
            await saver.setup()  # optional: from_conn_string already did it
            graph = builder.compile(checkpointer=saver)

    Sync methods work from other threads; from the event loop's own thread they
    raise ``asyncio.InvalidStateError`` (use the ``a``-methods there).
    """

    _driver_class = AsyncSqliteDriver

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls, conn_string: str, *, serde: SerializerProtocol | None = None, adopt: bool | None = None, ttl: Any = None,
        retention: Any = None, cache_max_bytes: int | None = None,
    ) -> AsyncIterator[AsyncSqliteSaver]:
        """Open (creating if needed) a SQLite database — a path, ``":memory:"`` or
        ``sqlite:///path`` — and set up threadline's tables."""
        conn = await aconnect(conn_string)
        try:
            saver = cls(conn, serde=serde, adopt=adopt, ttl=ttl, retention=retention, cache_max_bytes=cache_max_bytes)
            saver._file_ready = True
            await saver.setup()
            async with saver._sweeping():
                yield saver
        except sqlite3.Error as exc:
            raise door_error(exc, path_of(conn_string)) from exc
        finally:
            await conn.close()

    async def setup(self) -> None:
        if self.is_setup:  # as the sync saver's
            return
        async with self.lock:
            try:
                if not self._file_ready and not self.conn.in_transaction:
                    if (await self.conn.execute_fetchall(PAGE_COUNT))[0][0] == 0:
                        await self.conn.execute_fetchall(AUTO_VACUUM)
                    await self.conn.execute_fetchall(WAL)  # its row read: no statement left running
                await super().setup()
            except sqlite3.Error as exc:
                raise door_error(exc, "the SQLite database") from exc

    async def _arun(self, op: ops.Op, *, write: bool) -> Any:
        if not self.is_setup:
            await self.setup()
        async with self.lock:
            return await self._atransaction(op, write)

    async def _atransaction(self, op: ops.Op, write: bool) -> Any:
        return await self._driver.transaction(op, write)
