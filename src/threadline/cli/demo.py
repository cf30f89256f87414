"""``threadline demo``: run the insurance-consultation agent on a fresh SQLite file and show its history."""

from __future__ import annotations

import os

import typer

from threadline.cli import DEMO_DB, Command, app
from threadline.cli.shared import fail, out


@app.command(cls=Command)
def demo(
    db: str = typer.Option(
        DEMO_DB, "--db", metavar="PATH", help="SQLite file to (re)create (path or sqlite:///path). Deleted first if it holds a previous demo run."
    ),
    force: bool = typer.Option(False, "--force", help="Delete the file even if it does not look like a previous demo database."),
) -> None:
    """Run a scripted agent: 2 turns, an approval interrupt, a restart + resume, time travel; then the tree and the disk.

    Offline and deterministic (a scripted chat model; no API key). The default
    file is ./threadline-demo.db — deliberately not $THREADLINE_DB, since the demo
    starts by deleting the file.
    """
    from threadline.backends import entry_of
    from threadline.backends.sqliteconn import path_of
    from threadline.demo.scenario import NotADemoDatabase, run_demo  # the agent (langgraph.graph) only loads for the demo

    if not entry_of(db).paths:
        fail(f"threadline demo runs on a SQLite file; got {db!r}", 2)
    folder = os.path.dirname(os.path.abspath(path_of(db)))
    if not os.path.isdir(folder):
        fail(f"No such directory for --db: {folder}", 2)
    try:
        run_demo(db, out, force=force)
    except NotADemoDatabase as exc:
        fail(f"Refusing to delete: {exc}. Pass --force to delete it anyway, or choose another --db.")
