"""Opening a database for the browser: writable, or read-only when asked or when it has to be.

Read-only is enforced by the database, not only by hiding buttons: a SQLite file is
opened with ``mode=ro``; a Postgres session gets ``default_transaction_read_only=on``.
A database the process cannot write (a read-only file, a hot standby, a role without
INSERT/UPDATE/DELETE on threadline's tables) is opened read-only by default.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from threadline import BackendError, SqliteSaver, open_saver
from threadline.backends import backend_of
from threadline.backends.sqlite import path_of
from threadline.storage.ops import Q

READ_ONLY_OPTION = "-c default_transaction_read_only=on"


@dataclass
class Opened:
    """An open saver, whether it is read-only, and why (None when writable)."""

    saver: Any
    read_only: bool
    reason: str | None
    backend: str


def read_only_dsn(url: str) -> str:
    """A Postgres URL whose sessions are read-only (``options`` merged with any already given)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    options = [v for k, v in query if k == "options"]
    query = [(k, v) for k, v in query if k != "options"] + [("options", " ".join([*options, READ_ONLY_OPTION]))]
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))


def _sqlite_writable(path: str) -> bool:
    folder = os.path.dirname(os.path.abspath(path))
    return os.access(path, os.W_OK) and os.access(folder, os.W_OK)


def _postgres_read_only_op(d: Any) -> Any:
    found = yield Q(
        "SELECT pg_is_in_recovery(), current_setting('transaction_read_only'), "
        "has_table_privilege('threadline_checkpoints', 'INSERT') AND has_table_privilege('threadline_checkpoints', 'UPDATE') "
        "AND has_table_privilege('threadline_checkpoints', 'DELETE')"
    )
    standby, tx_read_only, can_write = found[0]
    if standby:
        return "the server is a standby (in recovery)"
    if tx_read_only == "on":
        return "the session is read-only (default_transaction_read_only)"
    if not can_write:
        return "this role cannot write threadline's tables"
    return None


@contextmanager
def open_for_ui(url: str, *, read_only: bool = False) -> Iterator[Opened]:
    """Open ``url`` (a SQLite path / ``sqlite:///`` URL or a ``postgresql://`` URL) for the browser.

    Raises BackendError when a SQLite file does not exist (the browser never creates
    an empty database) or the database cannot be opened.
    """
    backend = backend_of(url)
    if backend == "sqlite":
        path = path_of(url)
        if path == ":memory:" or not os.path.exists(path):
            raise BackendError(f"no SQLite database at {path!r}; pass --db (run `threadline demo` to make one)")
        reason = "opened with --read-only" if read_only else None
        if not read_only and not _sqlite_writable(path):
            reason = "the file (or its folder) is not writable by this process"
        if reason is None:
            with open_saver(url) as saver:
                yield Opened(saver, False, None, backend)
            return
        conn = sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=ro", uri=True, check_same_thread=False, isolation_level=None)
        try:
            conn.execute("PRAGMA busy_timeout=30000")
            saver = SqliteSaver(conn)
            try:
                saver.setup()
            except sqlite3.Error as exc:
                raise BackendError(f"cannot read {path!r} read-only: {exc}") from exc
            yield Opened(saver, True, reason, backend)
        finally:
            conn.close()
        return
    with open_saver(read_only_dsn(url) if read_only else url) as saver:
        reason = "opened with --read-only" if read_only else saver.run(_postgres_read_only_op(saver.dialect))
        yield Opened(saver, reason is not None, reason, backend)
