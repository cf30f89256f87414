"""What every command shares: the ``@command`` decorator, the consoles, errors and ``--json``.

A command is one thin function over a library call::

    @command("threads", render=render.threads)
    def threads(saver, limit: int = Limit, ...) -> ThreadPage:
        \"\"\"List threads.\"\"\"
        return read.list_threads(saver, limit=limit, ...)

``@command`` adds ``--db`` and ``--json`` to its options, opens the database, turns a
library error into one line on stderr with an exit code, and prints the result: its
``to_json()`` with ``--json``, else ``render(result, **options)``. A function that
declares a ``progress`` parameter gets a callback driving a progress bar on stderr.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from threadline.cli import app, default_db
from threadline.errors import ThreadlineError

out = Console()
err = Console(stderr=True)

DbOption = typer.Option(None, "--db", help="Database URL or path (default: $THREADLINE_DB or ./threadline-demo.db).")
JsonOption = typer.Option(False, "--json", help="Print JSON on stdout instead of tables.")


def fail(message: str, code: int = 1) -> None:
    """Print ``error: message`` on stderr and exit with ``code``."""
    err.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code)


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


@contextmanager
def opened(db: str | None, *, create: bool = False) -> Iterator[Any]:
    """A saver on ``db`` (default ``$THREADLINE_DB`` or the demo database).

    A missing SQLite file is an error unless ``create``."""
    from threadline.backends import backend_of, open_saver
    from threadline.backends.sqlite import path_of

    url = db or default_db()
    if not create and backend_of(url) == "sqlite":
        path = path_of(url)
        if path != ":memory:" and not os.path.exists(path):
            fail(f"no database at {path!r} (pass --db, set $THREADLINE_DB, or run `threadline demo`)")
    with open_saver(url) as saver:
        yield saver


@contextmanager
def progress_bar(label: str, enabled: bool) -> Iterator[Callable[[int, int, str], None]]:
    """A transient progress bar on stderr; yields the library's ``progress(done, total, what)`` callback."""
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=err, transient=True, disable=not enabled)
    with bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int, what: str) -> None:
            bar.update(task, completed=done, total=total, description=what[:40])

        yield update


def command(
    name: str,
    *,
    render: Callable[..., None] | None = None,
    opens: str = "db",
    problems: Callable[[Any], bool] | None = None,
    check: Callable[[dict[str, Any]], None] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn`` as ``threadline NAME`` with the shared options.

    ``opens``: ``"db"`` — ``fn(saver, **options)`` on the database named by ``--db``;
    ``"target"`` — the same, but ``--db`` (or ``$THREADLINE_DB``) must be given and the
    database is created when missing; ``"none"`` — ``fn(**options)``, no database.
    ``render(result, **options)`` prints the result for people; ``problems(result)``
    true makes the command exit 1 after printing (fsck findings, failed verification).
    ``check(options)`` validates input before the database is opened; an error it raises
    is a usage error (exit 2).
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(fn, eval_str=True)
        params = list(sig.parameters.values())
        if opens != "none":
            params = params[1:]  # the saver
        wants_progress = any(p.name == "progress" for p in params)
        params = [p for p in params if p.name != "progress"]
        kw = inspect.Parameter.KEYWORD_ONLY
        if opens != "none":
            params.append(inspect.Parameter("db", kw, default=DbOption, annotation=str))
        params.append(inspect.Parameter("as_json", kw, default=JsonOption, annotation=bool))

        @functools.wraps(fn)
        def run(**options: Any) -> None:
            db = options.pop("db", None)
            as_json = options.pop("as_json")
            if opens == "target" and not (db or os.environ.get("THREADLINE_DB")):
                fail(f"{name} writes into the database you name: pass --db URL (or set $THREADLINE_DB)", 2)
            if check is not None:
                try:
                    check(options)
                except (ThreadlineError, ValueError, OSError) as exc:
                    fail(str(exc), 2)
            result = _call(fn, db, opens, options, wants_progress, name, as_json)
            if as_json:
                emit(jsonable(result))
            elif render is not None:
                render(result, **options)
            if problems is not None and problems(result):
                raise typer.Exit(1)

        run.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params}
        app.command(name)(run)
        return fn

    return decorate


def _call(fn: Callable[..., Any], db: str | None, opens: str, options: dict[str, Any], wants_progress: bool,
          name: str, as_json: bool) -> Any:
    try:
        with progress_bar(name, wants_progress and not as_json) as tick:
            if wants_progress:
                options = {**options, "progress": tick}
            if opens == "none":
                return fn(**options)
            with opened(db, create=opens == "target") as saver:
                return fn(saver, **options)
    except (ThreadlineError, ValueError, LookupError, OSError) as exc:
        fail(str(exc))
