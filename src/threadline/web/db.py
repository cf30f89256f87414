"""Opening a database for the browser: writable, or read-only when asked or when it has to be.

Read-only is enforced by the database, not only by hiding buttons: the backend's read-only
opener (``threadline.backends.readonly``; a SQLite file opened ``mode=ro``, a Postgres
session with ``default_transaction_read_only``). A database this process cannot write (a
read-only file, a hot standby, a role without INSERT/UPDATE/DELETE on threadline's tables:
the backend's ``write_refusal``) is opened read-only by default.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from threadline.backends import entry_of, open_saver
from threadline.backends.readonly import open_reader
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
    """Open ``url`` (a path, ``sqlite:///`` or ``postgresql://`` URL) for the browser.

    Raises NotADatabaseError when there is no database there (the browser never creates
    an empty one) or, read-only, when it is not a threadline database of this release;
    BackendError when it cannot be opened."""
    entry = entry_of(url)
    with ExitStack() as stack:
        try:
            reason = "opened with --read-only" if read_only else entry.get("write_refusal")(url)
            saver = stack.enter_context(open_saver(url) if reason is None else open_reader(url))
        except NotADatabaseError as exc:
            raise NotADatabaseError(f"{exc}; pass --db (run `threadline demo` to make one)") from None
        yield Opened(saver, reason is not None, reason, entry.name)
