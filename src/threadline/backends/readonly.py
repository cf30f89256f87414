"""Open a database for reading only: nothing is created, migrated or written.

``open_reader(url)`` gives a saver on an existing threadline database whose operations
run read-only; ``open_readonly(url)`` gives the same kind of saver on any database
(an official saver's, for import) together with what it holds (``SchemaState``).

* SQLite: the file is opened with ``mode=ro``, so SQLite itself refuses every write and
  never creates the file. A database in WAL mode needs its ``-shm`` index; on read-only
  media (a mounted backup) where it cannot be created, the file is opened
  ``immutable=1`` instead — read as a file nobody changes (SQLite's rule for
  read-only media; any ``-wal`` content there is not read).
* Postgres: the session's transactions are ``READ ONLY`` (``default_transaction_read_only``).

Neither runs ``setup``: a database that is not threadline's, or whose threadline schema
is older than this release, is reported (``NotADatabaseError``) rather than changed.

``open_database(url)`` gives a ``Database`` instead of a saver where the backend has one
(SQLite, Postgres): what the read models need of a saver, without LangGraph's saver classes — for the
commands that list threads, whose start-up LangGraph's import (LangChain's) would otherwise be
most of.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from threadline.backends.registry import entry_of, masked
from threadline.errors import BackendError, NotADatabaseError
from threadline.storage import ops

if TYPE_CHECKING:
    from threadline.saver import EngineSaver


@contextmanager
def open_readonly(url: str, *, serde: Any = None) -> Iterator[tuple[EngineSaver, ops.SchemaState]]:
    """A saver on ``url`` whose operations cannot write, and what the database holds.

    Nothing is checked beyond opening: the caller decides what the ``SchemaState`` allows.
    Raises NotADatabaseError for a missing file or one that is not SQLite, BackendError
    when a server cannot be reached."""
    from threadline.backends import entry_of, env_codec

    try:
        entry = entry_of(url)
    except BackendError as exc:
        raise NotADatabaseError(str(exc)) from None
    with entry.get("read_only")(url, serde=serde) as opened:
        opened[0].blob_codec = env_codec(None)  # the environment's keys, as open_saver
        yield opened


@contextmanager
def open_reader(url: str, *, serde: Any = None, official: bool = False) -> Iterator[EngineSaver]:
    """A read-only saver on an existing threadline database of this release; with ``official``,
    also on a database only LangGraph's official saver has written (its ``schema_state`` then
    says there are no threadline tables: read its threads through
    ``transfer.official.thread_view`` and ``read.list_threads(official=True)``).

    Raises NotADatabaseError naming what the database is instead (see ``require_threadline``),
    SchemaError for a newer release's schema."""
    with open_readonly(url, serde=serde) as (saver, state):
        _check(url, state, type(saver).__name__, official)
        saver._setup_done(state)
        yield saver


class DeferredSerializer:
    """threadline's default serializer (``codec.serde.default_serde``), created when a value is
    first decoded: a listing of finished threads decodes none, and LangGraph's serializer module
    imports LangChain. Every attribute is the real serializer's."""

    __slots__ = ("_real",)

    def __init__(self) -> None:
        self._real: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._real is None:
            from threadline.codec.serde import default_serde

            self._real = default_serde()
        return getattr(self._real, name)


class Database:
    """A read-only handle on a threadline database: what the read models use of a saver
    (``run``, ``dialect``, ``serde``, ``blob_codec``, ``schema_state``, ``adopt``) on a backend
    driver, with no LangGraph class loaded. ``serde`` is a ``DeferredSerializer``;
    ``blob_codec`` has the environment's keys (``backends.env_codec``); ``adopt`` is False (a
    read adopts nothing). ``run(op, write=True)`` raises BackendError: nothing is written."""

    adopt = False

    def __init__(self, driver: Any, state: ops.SchemaState) -> None:
        from threadline.backends import env_codec

        self.driver, self.dialect, self.schema_state = driver, driver.dialect, state
        self.serde = DeferredSerializer()
        self.blob_codec = env_codec(None)

    def run(self, op: ops.Op, *, write: bool = False) -> Any:
        """Run a read-only operation (``storage.ops``, ``read``) in one transaction."""
        if write:
            raise BackendError("this database handle is read-only: open a saver to write")
        return self.driver.run(op, write=False)


@contextmanager
def open_database(url: str, *, official: bool = False) -> Iterator[Database | EngineSaver]:
    """``open_reader``'s check and result for the read models alone: a ``Database`` where the
    backend has one (SQLite, Postgres), else ``open_reader``'s saver (Redis). Errors as ``open_reader``."""
    try:
        entry = entry_of(url)
    except BackendError as exc:
        raise NotADatabaseError(str(exc)) from None
    if "database" not in entry.parts:
        with open_reader(url, official=official) as saver:
            yield saver
        return
    with entry.get("database")(url) as (database, state):
        _check(url, state, entry.parts["saver"].rpartition(":")[2], official)
        yield database


def _check(url: str, state: ops.SchemaState, saver_name: str, official: bool) -> None:
    if not (official and state.official and not state.is_threadline):
        require_threadline(url, state, saver_name)


def require_threadline(url: str, state: ops.SchemaState, saver_name: str, *, current: bool = True) -> None:
    """NotADatabaseError unless ``state`` is a threadline schema (of this release when ``current``),
    saying what the database is and what to do: ``threadline import`` or adoption for an official
    saver's, ``threadline setup`` for an older threadline schema. SchemaError for a newer one."""
    where = _where(url)
    if not state.is_threadline:
        if state.official:
            raise NotADatabaseError(
                f"{where} is a database of LangGraph's official {saver_name}, not threadline's: copy its threads "
                f"with `threadline import {masked(url)} --db NEW`, or open it with threadline's saver in your program to adopt "
                "each thread on first use"
            )
        raise NotADatabaseError(f"{where} {entry_of(url).nothing}")
    state.check_version(where)
    if current and not state.current:
        raise NotADatabaseError(f"{where} was written by an older threadline release: migrate it once with "
                                f"`threadline setup --db {masked(url)}` (or open it with threadline's saver), then read it")


def _where(url: str) -> str:
    return entry_of(url).get("describe")(url)
