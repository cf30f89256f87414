"""``threadline demo``: run the insurance-consultation agent on a fresh SQLite file and show its history."""

from __future__ import annotations

import typer
from rich.console import Console

from threadline.cli import DEMO_DB, app

@app.command()
def demo(
    db: str = typer.Option(
        DEMO_DB, "--db", help="SQLite file to (re)create (path or sqlite:///path). Deleted first if it holds a previous demo run."
    ),
    force: bool = typer.Option(False, "--force", help="Delete the file even if it does not look like a previous demo database."),
) -> None:
    """Run a scripted agent: 2 turns, an approval interrupt, a restart + resume, time travel; then the tree and the disk.

    Offline and deterministic (a scripted chat model; no API key). The default
    file is ./threadline-demo.db — deliberately not $THREADLINE_DB, since the demo
    starts by deleting the file.
    """
    import os

    from threadline.demo.scenario import NotADemoDatabase, run_demo
    from threadline.backends.sqlite import path_of
    from threadline.backends import backend_of

    console = Console()
    if backend_of(db) != "sqlite":
        console.print(f"[red]threadline demo runs on a SQLite file; got {db!r}[/red]")
        raise typer.Exit(2)
    folder = os.path.dirname(os.path.abspath(path_of(db)))
    if not os.path.isdir(folder):
        console.print(f"[red]No such directory for --db: {folder}[/red]")
        raise typer.Exit(2)
    try:
        run_demo(db, console, force=force)
    except NotADemoDatabase as exc:
        console.print(f"[red]Refusing to delete: {exc}.[/red] Pass --force to delete it anyway, or choose another --db.")
        raise typer.Exit(1) from None
