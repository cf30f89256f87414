"""Opening a database for the browser: writable, or read-only when asked or when it has to be.

Read-only is enforced by the database, not only by hiding buttons: the backend's read-only
opener (``threadline.backends.readonly``; a SQLite file opened ``mode=ro``, a Postgres
session with ``default_transaction_read_only``). A database this process cannot write (a
read-only file, a hot standby, a role without INSERT/UPDATE/DELETE on threadline's tables:
the backend's ``write_refusal``) is opened read-only by default. Nothing is created either: a
database that holds nothing of threadline's (an empty file, schema or Redis prefix) is refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from threadline.backends import entry_of, open_saver
from threadline.backends.readonly import open_reader, open_readonly, require_threadline
from threadline.errors import NotADatabaseError


@dataclass
class Opened:
    """An open saver, whether it is read-only, and why (None when writable)."""

    saver: Any
    read_only: bool
    reason: str | None
    backend: str


@contextmanager
def open_for_ui(url: str, *, read_only: bool = False) -> Iterator[Opened]:
    """Open ``url`` (a path or a URL of a registered backend: ``sqlite:///``, ``postgresql://``,
    ``redis://…?prefix=``, ``redis+cluster://…``) for the browser.

    Raises NotADatabaseError when there is no database there (the browser never creates
    an empty one; an official saver's database is opened, threadline adopts its threads) or,
    read-only, when it is not a threadline database of this release; BackendError when it
    cannot be opened."""
    entry = entry_of(url)
    with ExitStack() as stack:
        try:
            reason = "opened with --read-only" if read_only else entry.get("write_refusal")(url)
            if reason is None:
                _require_database(url)
            saver = stack.enter_context(open_saver(url) if reason is None else open_reader(url))
        except NotADatabaseError as exc:
            raise NotADatabaseError(f"{exc}; pass --db (run `threadline demo` to make one)") from None
        yield Opened(saver, reason is not None, reason, entry.name)


def _require_database(url: str) -> None:
    """NotADatabaseError when ``url`` holds neither threadline's schema (of any release: opening
    it writable migrates it) nor an official saver's tables (threadline adopts their threads)."""
    with open_readonly(url) as (saver, state):
        if not state.official:
            require_threadline(url, state, type(saver).__name__, current=False)
