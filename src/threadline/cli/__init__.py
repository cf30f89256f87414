"""The ``threadline`` command: a thin typer + rich skin over the library.

Command modules register themselves on ``app`` through ``shared.command``, which gives
every command the shared options (``--db``, ``--json``) and error handling: ``reads``
(threads, history, show, diff, audit, latest, stats), ``changes`` (rollback, fork,
delete, prune), ``repairs`` (fsck, rebuild), ``transfers`` (export, import) and
``demo``. Renderers for people live in ``render``.
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


# Command modules (each adds its commands to ``app``).
from threadline.cli import changes, demo, reads, repairs, transfers  # noqa: E402,F401
from threadline.cli import keys  # noqa: E402,F401


def main() -> None:
    app()
