"""``threadline ui``: serve the local time-travel browser (the app is ``threadline.web``)."""

from __future__ import annotations

import os

import typer
from rich.console import Console
from rich.markup import escape

from threadline.cli import Command, app, default_db
from threadline.cli.shared import Db as DbOption


@app.command(cls=Command)
def ui(
    db: str | None = DbOption,
    host: str = typer.Option("127.0.0.1", "--host", metavar="HOST", help="Interface to listen on. Keep the loopback default unless you know why."),
    port: int = typer.Option(8765, "--port", metavar="PORT", help="Port to listen on (0: any free port)."),
    no_browser: bool = typer.Option(False, "--no-browser", help="Do not open a browser; just print the URL."),
    read_only: bool = typer.Option(False, "--read-only", help="Browse only: actions off, database opened read-only."),
    graph: str | None = typer.Option(
        None, "--graph", metavar="MODULE:FACTORY", help="The agent's graph as module:factory (default $THREADLINE_GRAPH): enables edit-and-branch, answering interrupts, replays and runs."
    ),
) -> None:
    """Browse threads, checkpoints and branches in a local web app, and act on them.

    Prints a URL with a host name (http://threadline-….localhost:PORT, which browsers resolve
    to this machine) and an access token made for this run, and opens it. Rollback, fork,
    delete, prune and edit-and-branch each show what they change before you confirm;
    --read-only (or a database this process cannot write) turns them off.
    """
    from threadline.errors import ThreadlineError
    from threadline.web import UIConfig, serve
    from threadline.web.security import listen_kind

    err = Console(stderr=True)
    if listen_kind(host) != "loopback":
        err.print(f"[yellow]warning:[/yellow] listening on {escape(host)}: anyone who can reach it and has the URL's token can use it, "
                  "and a browser that opens it by that address sends its cookie to every server there.", soft_wrap=True)
    config = UIConfig(db=db or default_db(), read_only=read_only, graph=graph or os.environ.get("THREADLINE_GRAPH"), host=host, port=port)
    try:
        serve(config, open_browser=not no_browser, announce=typer.echo)
    except OSError as exc:
        err.print(f"[red]error:[/red] cannot listen on {escape(host)}:{port} ({escape(str(exc))}); pass another --port")
        raise typer.Exit(1) from None
    except (ThreadlineError, ValueError) as exc:  # the database named cannot be served: an input error
        err.print(f"[red]error:[/red] {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(2) from None
