"""Opening a database for the browser: read for browsing, written only when an action is taken.

Pages read through the backend's read-only opener (``threadline.backends.readonly``; a SQLite
file opened ``mode=ro``, a Postgres session with ``default_transaction_read_only``), so opening
the browser and looking around writes nothing — no table is created, no thread adopted, not
even on a database only LangGraph's official saver has written. The database is opened for
writing (``open_saver``: its tables set up, the thread adopted) when an action is confirmed
(``Opened.writer``). A database this process cannot write (a read-only file, a hot standby, a
role without INSERT/UPDATE/DELETE on threadline's tables: the backend's ``write_refusal``) is
opened read-only by default. A database that holds nothing of threadline's nor of the official
saver's (an empty file, schema or Redis prefix) is refused.

A thread the official saver's tables hold checkpoints of that threadline has not adopted yet is
read through a view (``Opened.view``: ``transfer.official.thread_view``, kept for the next
request while nothing changes).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from threadline.backends import entry_of, open_saver
from threadline.backends.readonly import open_reader, open_readonly, require_threadline
from threadline.errors import NotADatabaseError
from threadline.read.official import scope_of
from threadline.storage import adopt, ops
from threadline.lifecycle.cold import cold_archives_op
from threadline.transfer.official import thread_view

VIEWS_KEPT = 64  # thread views kept between requests (a page lists up to 50 threads)


@dataclass
class Opened:
    """An open database for the browser: ``saver`` reads (read-only unless the database had to be
    migrated to be read), whether actions are off (``read_only``) and why (``reason``)."""

    saver: Any
    read_only: bool
    reason: str | None
    backend: str
    url: str | None = None
    stack: ExitStack | None = field(default=None, repr=False)
    _writer: Any = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _views: OrderedDict = field(default_factory=OrderedDict, repr=False)

    def writer(self) -> Any:
        """The saver actions write with, opened (tables set up or migrated) on first use.
        RuntimeError when the database is open read-only (callers check ``read_only`` first)."""
        if self.read_only:
            raise RuntimeError(f"this database is open read-only ({self.reason})")
        with self._lock:
            if self._writer is None:
                if self.url is None or self.stack is None:
                    self._writer = self.saver  # opened writable from the start
                else:
                    self._writer = self.stack.enter_context(open_saver(self.url))
                    # the reader sees the tables the writer may just have created
                    self.saver.schema_state = self.saver.run(ops.schema_state(self.saver.dialect))
            return self._writer

    @contextmanager
    def view(self, thread_id: str) -> Iterator[Any]:
        """The saver serving ``thread_id``: ``saver``, or, when the official saver's tables hold
        checkpoints of it threadline has not adopted, a view of it as adopted (nothing written),
        or, when it is cold, of its archive (``lifecycle.cold``), kept until the thread changes
        (``VIEWS_KEPT`` of them)."""
        scope = scope_of(self.saver, True)
        if not thread_id:
            yield self.saver
            return
        progress = self.saver.run(adopt.view_progress_op(self.saver.dialect, thread_id, scope.threadline)) if scope.official else None
        cold = self.saver.run(cold_archives_op(self.saver.dialect, [thread_id])) if scope.threadline else {}
        if progress is None and not cold:
            yield self.saver
            return
        key = (thread_id, *(progress or ()), *cold.values())
        with self._lock:
            kept = self._views.get(key)
            if kept is None:
                stack = ExitStack()
                try:
                    kept = (stack.enter_context(thread_view(self.saver, [thread_id], official=True)), stack)
                except BaseException:
                    stack.close()
                    raise
                self._views[key] = kept
                while len(self._views) > VIEWS_KEPT:
                    self._views.popitem(last=False)[1][1].close()
            self._views.move_to_end(key)
        yield kept[0]

    def close_views(self) -> None:
        with self._lock:
            while self._views:
                self._views.popitem()[1][1].close()


@contextmanager
def open_for_ui(url: str, *, read_only: bool = False) -> Iterator[Opened]:
    """Open ``url`` (a path or a URL of a registered backend: ``sqlite:///``, ``postgresql://``,
    ``redis://…?prefix=``, ``redis+cluster://…``) for the browser, writing nothing.

    Raises NotADatabaseError when there is no database there (the browser never creates an
    empty one; an official saver's database is browsed as it is) or it holds neither
    threadline's tables nor an official saver's; BackendError when it cannot be opened."""
    entry = entry_of(url)
    with ExitStack() as stack:
        try:
            reason = "opened with --read-only" if read_only else entry.get("write_refusal")(url)
            if reason is None and _needs_migration(url):
                # an older threadline schema is read only once migrated: opening it writable migrates it
                opened = Opened(stack.enter_context(open_saver(url)), False, None, entry.name)
            else:
                saver = stack.enter_context(open_reader(url, official=True))
                opened = Opened(saver, reason is not None, reason, entry.name, url, stack)
        except NotADatabaseError as exc:
            raise NotADatabaseError(f"{exc}; pass --db (run `threadline demo` to make one)") from None
        try:
            yield opened
        finally:
            opened.close_views()


def _needs_migration(url: str) -> bool:
    """Whether ``url`` holds a threadline schema of an older release (read once migrated).
    NotADatabaseError when it holds neither threadline's schema nor an official saver's tables."""
    with open_readonly(url) as (saver, state):
        if not state.official:
            require_threadline(url, state, type(saver).__name__, current=False)
        return state.is_threadline and not state.current
