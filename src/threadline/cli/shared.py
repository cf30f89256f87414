"""What every command shares: the ``@command`` decorator, the consoles, errors and ``--json``.

A command is one thin function over a library call::

    @command("threads", render=render.threads)
    def threads(saver, limit: int = Limit, ...) -> ThreadPage:
        \"\"\"List threads.\"\"\"
        return read.list_threads(saver, limit=limit, ...)

``@command`` adds ``--db``, ``--json`` and ``--debug`` to its options, opens the
database (read-only for reads), turns any error into one line on stderr with an exit
code, and prints the result: its ``to_json()`` with ``--json``, else
``render(result, **options)``. A function that declares a ``progress`` parameter gets a
callback driving a progress bar on stderr; one that declares ``confirm`` gets
``confirm(preview, question)``, which asks on a terminal before a destructive step; one that
declares ``stream`` gets ``render.stream`` to print results as they come (None with ``--json``).

Exit codes: 0 done; 1 problems found (fsck, import verification, a damaged thread in a
listing) or the operation was refused or failed; 2 usage or input error (bad option, unknown
thread or checkpoint, not a threadline database).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import os
import sqlite3
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from threadline.cli import Command, app, default_db
from threadline.errors import (ConfigError, CorruptRowError, EncryptionError, FilterError, MissingExtraError, NotADatabaseError,
                               NotFoundError, SchemaError, ThreadlineError)
from threadline.lazy import LazyModule

# the library loads when a command runs, not for --help
backends = LazyModule("threadline.backends")
readonly = LazyModule("threadline.backends.readonly")

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

Db = typer.Option(None, "--db", metavar="URL", show_default=False,
                  help="Database: a SQLite path or sqlite:///path, postgresql://…, or redis://…?prefix=… "
                       "(rediss://, redis+cluster://) [default: $THREADLINE_DB, else ./threadline-demo.db]")
Json = typer.Option(False, "--json", help="Print JSON on stdout instead of tables.")
Debug = typer.Option(False, "--debug", help="On an error, show the full traceback.")

_INPUT_ERRORS = (NotFoundError, ConfigError, FilterError, NotADatabaseError, SchemaError, MissingExtraError, ValueError)


def fail(message: str, code: int = 1) -> None:
    """Print ``error: message`` on stderr (one line) and exit with ``code``."""
    err.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code)


def explain(exc: BaseException) -> tuple[str, int]:
    """One line and an exit code for an error: 2 for bad input, 1 for everything else."""
    text = " ".join((exc.cli_message() if isinstance(exc, ThreadlineError) else str(exc)).split())
    names = sys.modules.get("threadline.read.names")  # an ambiguous name comes from there, once loaded
    if isinstance(exc, _INPUT_ERRORS) or (names is not None and isinstance(exc, names.AmbiguousNameError)):
        return text, 2
    if isinstance(exc, CorruptRowError) and not isinstance(exc, EncryptionError):  # a key problem names its own fix
        return f"{text} — `threadline fsck` lists the damaged rows and how each is repaired; `threadline restore` brings threads back from a backup", 1
    if isinstance(exc, (ThreadlineError, OSError)):
        return text, 1
    psycopg = sys.modules.get("psycopg")  # a psycopg error only once psycopg is loaded
    if isinstance(exc, sqlite3.Error) or (psycopg is not None and isinstance(exc, psycopg.Error)):
        return f"database error: {text}", 1
    return f"unexpected {type(exc).__name__}: {text} (run again with --debug for the traceback)", 1


def jsonable(result: Any) -> Any:
    """A result as JSON data: ``to_json()`` of library results, recursively through dicts and lists."""
    if hasattr(result, "to_json"):
        return result.to_json()
    if isinstance(result, dict):
        return {k: jsonable(v) for k, v in result.items()}
    if isinstance(result, (list, tuple)):
        return [jsonable(v) for v in result]
    return result


def emit(data: Any) -> None:
    typer.echo(json.dumps(data, ensure_ascii=False, default=str, indent=None))


def named_db(db: str | None, name: str) -> str:
    """The database a command that writes names: ``--db`` or ``$THREADLINE_DB``; exit 2 without one."""
    url = db or os.environ.get("THREADLINE_DB")
    if not url:
        fail(f"{name} writes to the database you name: pass --db URL (or set $THREADLINE_DB)", 2)
    return url


@contextmanager
def opened(db: str | None, mode: str, name: str, official: bool = False, lean: bool = False) -> Iterator[Any]:
    """A saver for a command: ``"read"`` — read-only on an existing threadline database
    (default ``$THREADLINE_DB`` or the demo database; with ``official``, also one only
    LangGraph's official saver wrote; with ``lean``, a ``readonly.Database`` where the backend
    has one); ``"write"`` — on an existing threadline database named
    explicitly (migrated if older); ``"target"`` — on the database named explicitly, created
    when missing."""
    if mode == "read":
        try:
            with (readonly.open_database if lean else readonly.open_reader)(db or default_db(), official=official) as saver:
                yield saver
        except NotADatabaseError as exc:
            if db or os.environ.get("THREADLINE_DB"):
                raise
            raise NotADatabaseError(f"{exc} (pass --db, set $THREADLINE_DB, or run `threadline demo`)") from None
        return
    url = named_db(db, name)
    if mode == "write":
        with readonly.open_readonly(url) as (checked, state):
            readonly.require_threadline(url, state, type(checked).__name__, current=False)  # setup below migrates an older one
    with backends.open_saver(url) as saver:
        yield saver


@contextmanager
def _whole(saver: Any, db: str | None, thread: str | None, names_thread: bool) -> Iterator[Any]:
    """The saver a read command of the whole database runs on (``command(official=True)``): the
    view of ``thread`` (``transfer.official.thread_view``), or ``saver``. NotADatabaseError as for
    any read when the command needs threadline's tables (no thread named) and there are none."""
    from threadline.transfer.official import thread_view

    state = saver.schema_state
    if names_thread and thread is None and not state.is_threadline:
        readonly.require_threadline(db or default_db(), state, type(saver).__name__)
    with thread_view(saver, [thread] if thread else [], official=True) as view:
        if view is saver and thread is not None and not state.is_threadline:
            raise NotFoundError(f"unknown thread {thread!r}")  # in an official saver's database that has none of that id
        if thread is not None and thread in getattr(view, "cold", ()):
            err.print(f"note: thread {escape(repr(thread))} is cold (moved whole to the object store): shown from its archive "
                      f"(reading restores nothing; `threadline tier --restore {escape(thread)}` brings it back)", soft_wrap=True)
        elif view is not saver:
            err.print(f"note: thread {escape(repr(thread))} has checkpoints in the official LangGraph saver's tables that "
                      "threadline has not adopted yet: shown as adoption would store them (reading adopts nothing)", soft_wrap=True)
        yield view


class _Bar:
    """A transient progress bar on stderr, shown from the first update until ``stop``."""

    def __init__(self, label: str, enabled: bool) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            console=err, transient=True, disable=not enabled)
        self.task = self.bar.add_task(label, total=None)
        self.live = False

    def __call__(self, done: int, total: int, what: str) -> None:
        if not self.live:
            self.bar.start()
            self.live = True
        self.bar.update(self.task, completed=done, total=total, description=what[:40])

    def stop(self) -> None:
        if self.live:
            self.bar.stop()
            self.live = False


def _confirmer(bar: _Bar, render: Callable[..., None] | None, options: dict[str, Any], as_json: bool, name: str):
    def confirm(preview: Any, question: str) -> None:
        if options.get("yes"):
            return
        bar.stop()
        if not sys.stdin.isatty():
            fail(f"{name} deletes data: pass --yes to confirm (see the plan first with --dry-run)", 2)
        if render is not None and not as_json:
            render(preview, **{**options, "dry_run": True})
        if not typer.confirm(question, default=False, err=True):
            fail("nothing changed", 1)

    return confirm


def signature(fn: Callable[..., Any]) -> inspect.Signature:
    """``fn``'s signature with its parameters' annotations evaluated (typer reads them), its
    return annotation left out: a result type may live in a module loaded only when it runs."""
    sig = inspect.signature(fn)
    params = [p.replace(annotation=eval(p.annotation, fn.__globals__)) if isinstance(p.annotation, str) else p  # noqa: S307
              for p in sig.parameters.values()]
    return sig.replace(parameters=params, return_annotation=inspect.Signature.empty)


def renderer(render: str | Callable[..., None] | None) -> Callable[..., None] | None:
    """``render`` itself, or the function ``"module.name"`` names in ``threadline.cli.render``."""
    if not isinstance(render, str):
        return render
    module, _, attr = render.rpartition(".")
    return getattr(importlib.import_module(f"threadline.cli.render.{module}"), attr)


def command(
    name: str,
    *,
    render: str | Callable[..., None] | None = None,
    opens: str | Callable[[dict[str, Any]], str] = "read",
    problems: Callable[[Any], bool] | None = None,
    prepare: Callable[[dict[str, Any]], None] | None = None,
    official: bool = False,
    thread: str | None = None,
    lean: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn`` as ``threadline NAME`` with the shared options.

    ``official``: a read command that sees the whole database of a program switched from
    LangGraph's official savers — it also opens a database only the official saver wrote,
    and the thread its option ``thread`` names, when the official tables hold checkpoints of
    it threadline has not adopted, is read through ``transfer.official.thread_view`` (as
    adopted, writing nothing). Without a thread named, such a command needs threadline's
    tables unless ``thread`` is None (a listing).

    ``opens``: how ``--db`` is opened (see ``opened``: ``"read"``, ``"write"``,
    ``"target"``), ``"none"`` for a command without a database, or a function of the
    options choosing one (``fsck --repair`` writes, ``fsck`` reads). ``fn(saver,
    **options)`` gets the saver first. ``render(result, **options)`` prints the result
    for people (``"module.name"``: ``name`` of ``threadline.cli.render.module``, loaded when
    the command runs); ``problems(result)`` true makes the command exit 1 after printing (an int
    other than 0: that exit code).
    ``prepare(options)`` checks (and may normalize) the options before the database is
    opened. ``lean``: a read command that uses only the read models (``threadline.read``),
    never a saver's methods: it gets a ``backends.readonly.Database``, which loads no LangGraph
    (most of a command's start-up) until a value is decoded.
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = signature(fn)
        params = list(sig.parameters.values())
        if opens != "none":
            params = params[1:]  # the saver
        injected = {p.name for p in params} & {"progress", "confirm", "stream"}
        params = [p for p in params if p.name not in injected]
        kw = inspect.Parameter.KEYWORD_ONLY
        if opens != "none":
            params.append(inspect.Parameter("db", kw, default=Db, annotation=str))
        params.append(inspect.Parameter("as_json", kw, default=Json, annotation=bool))
        params.append(inspect.Parameter("debug", kw, default=Debug, annotation=bool))

        @functools.wraps(fn)
        def run(**options: Any) -> None:
            db, as_json, debug = options.pop("db", None), options.pop("as_json"), options.pop("debug")
            debug = debug or bool(os.environ.get("THREADLINE_DEBUG"))
            try:
                show = renderer(render)
                mode = opens(options) if callable(opens) else opens
                if mode in ("write", "target"):
                    db = named_db(db, name)
                if prepare is not None:
                    prepare(options)
                bar = _Bar(name, "progress" in injected and not as_json)
                extra: dict[str, Any] = {}
                if "progress" in injected:
                    extra["progress"] = bar
                if "stream" in injected:
                    extra["stream"] = None if as_json else getattr(show, "stream", None)
                if "confirm" in injected:
                    extra["confirm"] = _confirmer(bar, show, options, as_json, name)
                try:
                    if mode == "none":
                        result = fn(**options, **extra)
                    elif official and mode == "read":
                        with opened(db, mode, name, official=True, lean=lean) as saver, _whole(saver, db, options.get(thread) if thread else None,
                                                                                     thread is not None) as view:
                            result = fn(view, **options, **extra)
                    else:
                        with opened(db, mode, name, lean=lean) as saver:
                            result = fn(saver, **options, **extra)
                finally:
                    bar.stop()
                if as_json:
                    emit(jsonable(result))
                elif show is not None:
                    show(result, **options)
            except (typer.Exit, typer.Abort):
                raise
            except Exception as exc:
                if debug:
                    traceback.print_exc()
                fail(*explain(exc))
            if problems is not None and (code := problems(result)):
                raise typer.Exit(code if type(code) is int else 1)

        run.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params}
        app.command(name, cls=Command)(run)
        return fn

    return decorate
