"""SQLite below the savers: connections, the transaction around one operation (``SqliteDriver``,
``AsyncSqliteDriver``), errors as one line, and an existing file opened read-only.

What the savers (``threadline.backends.sqlite``), the Store and the Cache share, and what a
read-only listing needs (``threadline.backends.readonly.Database``): nothing here loads
LangGraph, whose saver base class imports LangChain (most of a CLI listing's start-up).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from threadline.errors import BackendError, CorruptRowError, NotADatabaseError, ThreadlineError
from threadline.lazy import deferred

if TYPE_CHECKING:
    import aiosqlite

    from threadline.storage import ops
    from threadline.storage.runner import drive

# the statement loop loads with the first driver (a saver's, a store's or a cache's), not the import (issue 44)
_load_runner = deferred(globals(), {"drive": "threadline.storage.runner:drive"})

T = TypeVar("T")
BUSY_TIMEOUT_MS = 30_000
WAL = "PRAGMA journal_mode=WAL"  # readers never block the writer
# Deleted rows' pages can be given back to the file system (threadline.lifecycle.vacuum).
# Takes effect only in a new, empty file, and must come before WAL; older files are
# converted by `threadline vacuum --full`.
AUTO_VACUUM = "PRAGMA auto_vacuum=INCREMENTAL"
PAGE_COUNT = "PRAGMA page_count"
PRAGMAS = ";".join((
    WAL,
    # A commit is on disk before put returns, as with the official savers (SQLite's default);
    # NORMAL would lose the last commits on power loss (docs/operations.md: choosing it).
    "PRAGMA synchronous=FULL",
    f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}",
))  # one script: one call into aiosqlite's thread


def path_of(conn_string: str) -> str:
    """Accept a plain path, ``:memory:`` or a ``sqlite:///path`` URL."""
    for prefix in ("sqlite:///", "sqlite://"):
        if conn_string.startswith(prefix):
            return conn_string[len(prefix):] or ":memory:"
    return conn_string


def door_error(exc: sqlite3.Error, where: str) -> ThreadlineError:
    """The one-line error for a SQLite failure while opening or setting up ``where``."""
    text = str(exc)
    if "file is not a database" in text or isinstance(exc, sqlite3.DatabaseError) and "malformed" in text:
        return BackendError(f"{where} is not a SQLite database ({text}); point it at a SQLite file or a new path")
    if "readonly" in text or "read-only" in text:
        return BackendError(
            f"{where} is read-only ({text}); threadline must create or migrate its tables there: "
            "open a writable copy, or run setup once on a writable database"
        )
    if "unable to open" in text:
        return BackendError(f"cannot open SQLite database {where} ({text}); check that its directory exists and is writable")
    if "locked" in text or "busy" in text:
        return BackendError(f"{where} is locked by another process ({text}); retry when its write transaction ends")
    return BackendError(f"SQLite database {where}: {text}")


@contextmanager
def at_door(where: str = "the SQLite database") -> Iterator[None]:
    """SQLite errors in the block (opening, setting up) raised as ``door_error``'s one line."""
    try:
        yield
    except sqlite3.Error as exc:
        raise door_error(exc, where) from exc


def run_error(exc: sqlite3.Error, conn: Any) -> Exception:
    """What a SQLite error during an operation means: a lock held by another process
    (BackendError), text that is not UTF-8 (a damaged row: CorruptRowError), or itself."""
    text = str(exc)
    if "locked" in text or "busy" in text:
        return door_error(exc, file_name(conn))
    if "Could not decode to UTF-8" in text:
        return CorruptRowError(f"{file_name(conn)}: a stored text column is not UTF-8 ({text})")
    return exc


def _begin(write: bool) -> str:
    return "BEGIN IMMEDIATE" if write else "BEGIN"


def connect(conn_string: str) -> sqlite3.Connection:
    """A connection for ``from_conn_string`` (savers, stores, caches): autocommit, WAL, a 30 s
    busy timeout, ``synchronous=FULL``, incremental auto-vacuum on a new file. Accepts a path, ``":memory:"`` or
    ``sqlite:///path``; BackendError when it cannot be opened or is not a SQLite database."""
    path = path_of(conn_string)
    try:
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    except sqlite3.Error as exc:
        raise door_error(exc, path) from exc
    try:
        if conn.execute(PAGE_COUNT).fetchone()[0] == 0:  # a new file: before WAL writes its header
            conn.execute(AUTO_VACUUM)
        conn.executescript(PRAGMAS)
    except sqlite3.Error as exc:
        conn.close()
        raise door_error(exc, path) from exc
    return conn


async def aconnect(conn_string: str) -> aiosqlite.Connection:
    """``connect`` through ``aiosqlite``."""
    import aiosqlite  # here, once per connection: a sync SqliteSaver's import loads no aiosqlite

    path = path_of(conn_string)
    conn = None
    try:
        conn = await aiosqlite.connect(path, isolation_level=None)
        if (await conn.execute_fetchall(PAGE_COUNT))[0][0] == 0:
            await conn.execute(AUTO_VACUUM)
        await conn.executescript(PRAGMAS)
    except sqlite3.Error as exc:
        if conn is not None:
            await conn.close()
        raise door_error(exc, path) from exc
    return conn


def _failed(exc: BaseException, conn: Any) -> BaseException:
    """What to raise for ``exc`` ending a transaction: a SQLite error's meaning (``run_error``)."""
    return run_error(exc, conn) if isinstance(exc, sqlite3.OperationalError) else exc


def transact(conn: sqlite3.Connection, op: ops.Op[T], dialect: Any, write: bool) -> T:
    """Run ``op`` on ``conn`` in one transaction (``BEGIN IMMEDIATE`` for writes, so concurrent
    processes queue on the busy timeout instead of failing to upgrade a read lock), commit,
    and roll back on any error: stored whole or not at all."""
    cur = conn.cursor()

    def begin(needed: bool) -> None:
        if needed and not conn.in_transaction:
            cur.execute(_begin(write))

    try:
        result = drive(op, cur, dialect, begin)
    except BaseException as exc:
        if conn.in_transaction:
            conn.rollback()
        if (mapped := _failed(exc, conn)) is exc:
            raise
        raise mapped from exc
    finally:
        cur.close()
    if conn.in_transaction:
        conn.commit()
    return result


class SqliteDriver:
    """One ``sqlite3`` connection shared by threads under a lock (savers, stores and caches):
    ``run(op, write=)`` runs a sans-IO operation in one transaction (``transact``)."""

    def __init__(self, conn: sqlite3.Connection, dialect: Any) -> None:
        _load_runner()
        self.conn = conn
        self.dialect = dialect
        self.lock = threading.RLock()

    def run(self, op: ops.Op[T], *, write: bool) -> T:
        with self.lock:
            return transact(self.conn, op, self.dialect, write)


class AsyncSqliteDriver:
    """One ``aiosqlite`` connection: ``run`` serializes operations by an ``asyncio.Lock``;
    ``transaction`` is the same for a caller already holding it.

    A whole operation runs in aiosqlite's own thread as one call (``transact`` on its
    ``sqlite3`` connection, through ``Connection._execute``, which every aiosqlite release
    since 0.17 has): each call is a hand-over between threads, costing CPU and latency, and
    statement by statement an agent's turn made about thirty of them."""

    def __init__(self, conn: aiosqlite.Connection, dialect: Any) -> None:
        _load_runner()
        self.conn = conn
        self.dialect = dialect
        self.lock = asyncio.Lock()

    async def run(self, op: ops.Op[T], *, write: bool) -> T:
        async with self.lock:
            return await self.transaction(op, write)

    async def transaction(self, op: ops.Op[T], write: bool) -> T:
        conn = self.conn
        return await conn._execute(lambda: transact(conn._conn, op, self.dialect, write))


def _sqlite_connect(path: str, immutable: bool) -> sqlite3.Connection:
    uri = f"file:{urllib.parse.quote(os.path.abspath(path))}?mode=ro" + ("&immutable=1" if immutable else "")
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout=30000")
    return conn

@contextmanager
def open_file(url: str) -> Iterator[tuple[SqliteDriver, ops.SchemaState]]:
    """A driver on an existing file opened ``mode=ro`` (``immutable=1`` on read-only media, where
    a WAL database's ``-shm`` cannot be created), and what the file holds; nothing is set up.
    NotADatabaseError for a missing file, a directory or a non-SQLite file."""
    from threadline.storage import ops
    from threadline.storage.dialect import SQLITE

    path = _existing_file(url)
    # On read-only media no -shm can be created next to a WAL database: read it as immutable.
    read_only_media = not os.access(os.path.dirname(os.path.abspath(path)), os.W_OK)
    for immutable in (False, True):
        conn = _sqlite_connect(path, immutable)
        driver = SqliteDriver(conn, SQLITE)
        try:
            state = driver.run(ops.schema_state(SQLITE), write=False)
        except sqlite3.DatabaseError as exc:
            conn.close()
            if getattr(exc, "sqlite_errorname", "") == "SQLITE_CANTOPEN" and read_only_media and not immutable:
                continue
            if "not a database" in str(exc) or "malformed" in str(exc):
                raise NotADatabaseError(f"{path!r} is not a SQLite database ({exc})") from exc
            raise BackendError(f"cannot read SQLite database {path!r} ({exc})") from exc
        try:
            yield driver, state
        finally:
            conn.close()
        return


@contextmanager
def open_database(url: str) -> Iterator[tuple[Any, ops.SchemaState]]:
    """``open_file``'s driver as a ``readonly.Database`` (the registry's ``database`` role)."""
    from threadline.backends.readonly import Database

    with open_file(url) as (driver, state):
        yield Database(driver, state), state


def _existing_file(url: str) -> str:
    """The path of ``url``; NotADatabaseError when no file is there, a directory is, or anything
    else that is not a regular file (a named pipe would block the open forever, a device never end)."""
    path = path_of(url)
    if path == ":memory:" or not os.path.exists(path):
        raise NotADatabaseError(f"no SQLite database at {path!r}: it does not exist")
    if os.path.isdir(path):
        raise NotADatabaseError(f"{path!r} is a directory, not a database file")
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise NotADatabaseError(f"{path!r} is not a regular file (a named pipe, device or socket): name a database file")
    return path


def write_refusal(url: str) -> str | None:
    """Why this process cannot write the existing file at ``url`` (the file or its folder is not
    writable: a WAL database writes beside it), or None. NotADatabaseError when it is missing."""
    path = _existing_file(url)
    folder = os.path.dirname(os.path.abspath(path))
    if os.access(path, os.W_OK) and os.access(folder, os.W_OK):
        return None
    return "the file (or its folder) is not writable by this process"


def describe(url: str) -> str:
    """How messages name the database at ``url``: its path."""
    return repr(path_of(url))


def file_name(conn: Any) -> str:
    """The file behind a connection (or a name given as text), for messages."""
    if isinstance(conn, str):
        return conn
    try:
        for _, name, file in conn.execute("PRAGMA database_list").fetchall():
            if name == "main":
                return repr(file or ":memory:")
    except sqlite3.Error:
        pass
    return "the SQLite database"
