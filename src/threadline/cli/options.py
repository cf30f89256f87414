"""Options and arguments several commands share. Values are checked by their callbacks:
a bad value is a usage error (exit 2) before any database is opened."""

from __future__ import annotations

import glob
import json
import os
import sys
from typing import Any

import typer

from threadline.errors import ThreadlineError
from threadline.lazy import LazyModule

read = LazyModule("threadline.read")  # loaded by the callbacks, when a command runs

CHECKPOINT_HELP = ("Checkpoint: its full id, 6 or more of its hex digits (as tables show them), a tag, HEAD, HEAD~N or step:N; "
                   "any of them followed by ~N or ^ goes up that many parents (HEAD^, 7fd56a87~2).")


def _duration(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return read.parse_duration(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def _where(items: list[str] | None) -> list[str] | None:
    for item in items or []:
        if "=" not in item:
            raise typer.BadParameter(f"expects KEY=VALUE, got {item!r}")
    return items


def metadata(items: list[str] | None) -> dict[str, Any]:
    """``--where KEY=VALUE`` items (checked by the option) as a metadata filter; values parsed as JSON when they are."""
    result: dict[str, Any] = {}
    for item in items or []:
        key, raw = item.split("=", 1)
        try:
            result[key] = json.loads(raw)
        except ValueError:
            result[key] = raw
    return result


def _graph(spec: str | None) -> Any:
    spec = spec or os.environ.get("THREADLINE_GRAPH")
    if not spec:
        return None
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return read.load_graph(spec)
    except ThreadlineError as exc:
        raise typer.BadParameter(str(exc)) from None


def _complete_thread(ctx: typer.Context, incomplete: str) -> list[str]:
    """Shell completion of a thread_id from the database the command line names (read-only)."""
    from threadline.backends.readonly import open_reader
    from threadline.cli import default_db
    from threadline.read.names import expand_threads

    try:
        with open_reader(ctx.params.get("db") or default_db()) as saver:
            return expand_threads(saver, [glob.escape(incomplete) + "*"])[:200]
    except Exception:  # completion never fails loudly: no database, no match → no candidates
        return []


def duration(flag: str, help: str) -> Any:
    """An option taking ``90s``, ``15m``, ``12h``, ``30d``, ``2w`` or seconds; the command gets seconds."""
    return typer.Option(None, flag, metavar="DURATION", help=help, callback=_duration)


def limit(default: int | None, what: str) -> Any:
    """``--limit N``: the page size of a listing."""
    return typer.Option(default, "--limit", min=1, metavar="N", help=f"Show at most N {what}.")


def checkpoint(required: bool = True, help: str = CHECKPOINT_HELP) -> Any:
    return typer.Argument(... if required else None, metavar="CHECKPOINT" if required else "[CHECKPOINT]", help=help,
                          show_default=False)


Thread = typer.Argument(..., metavar="THREAD", help="thread_id.", show_default=False, autocompletion=_complete_thread)
Offset = typer.Option(0, "--offset", min=0, metavar="N", help="Skip the first N (the next page).")
Ns = typer.Option("", "--ns", metavar="NS", help="checkpoint_ns (default: the root graph).", show_default=False)
Graph = typer.Option(
    None, "--graph", metavar="MODULE:ATTR", callback=_graph,
    help="The compiled graph, e.g. threadline.demo:build_graph [default: $THREADLINE_GRAPH].",
)
Where = typer.Option(None, "--where", metavar="KEY=VALUE", callback=_where,
                     help="Only threads with a checkpoint whose metadata has KEY=VALUE (VALUE read as JSON when it is, so '{\"$gt\": 3}' is an operator). Repeatable.")
Meta = typer.Option(None, "--meta", metavar="KEY=VALUE", callback=_where,
                    help="Only threads whose record metadata (`threadline thread-set`) has KEY=VALUE "
                         "(VALUE read as JSON when it is, so '{\"$gt\": 3}' is an operator; a dotted KEY a nested field). Repeatable.")
Threads = typer.Option(None, "--thread", metavar="THREAD",
                       help="Only these threads (repeatable; glob patterns such as 'user-*' allowed).")
def _per(value: str) -> str:
    if value not in ("branch", "thread"):
        raise typer.BadParameter(f"{value!r} is not one of branch, thread")
    return value


KeepLastPer = typer.Option("branch", "--per", metavar="branch|thread", callback=_per,
                           help="What --keep-last N counts in: each branch (old branches keep their newest N too) "
                                "or the whole thread (only its newest N stay; other branches' tips may go).")
Full = typer.Option(False, "--full", help="Show long values whole instead of folded.")
Yes = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation (for scripts).")
DryRun = typer.Option(False, "--dry-run", help="Only show what would be deleted; change nothing.")
Force = typer.Option(False, "--force", help="Also remove tagged checkpoints and pinned threads (with their tags).")
