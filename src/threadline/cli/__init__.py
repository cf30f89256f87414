"""The ``threadline`` command: a thin typer + rich skin over the library.

Command modules register themselves on ``app``; each is imported below.
Every command that reads a database takes ``--db URL`` (a path, ``sqlite:///path``
or ``postgresql://…``), defaulting to ``$THREADLINE_DB`` or the demo database.
"""

from __future__ import annotations

import os

import typer

DEMO_DB = "threadline-demo.db"

app = typer.Typer(
    name="threadline",
    help="Durable, branchable, inspectable state for LangGraph agents.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _group() -> None:
    """Durable, branchable, inspectable state for LangGraph agents."""


def default_db() -> str:
    """``$THREADLINE_DB`` if set, else the demo database in the working directory."""
    return os.environ.get("THREADLINE_DB") or DEMO_DB


DbOption = typer.Option(None, "--db", help="Database URL or path (default: $THREADLINE_DB or ./threadline-demo.db).")

# Command modules (each adds its commands to ``app``).
from threadline.cli import demo as _demo  # noqa: E402,F401
from threadline.cli import state as _state  # noqa: E402,F401
from threadline.cli import ui as _ui  # noqa: E402,F401


def main() -> None:
    app()
