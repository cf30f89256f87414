"""Transfer commands: Parquet export and import from LangGraph's official savers (``threadline.transfer``)."""

from __future__ import annotations

from typing import Any

import typer

from threadline.cli import options as O
from threadline.cli.render import changes as R
from threadline.cli.shared import command
from threadline.transfer import export as X
from threadline.transfer import official


@command("export", render=R.export)
def export(
    saver: Any,
    to: str = typer.Option(..., "--to", help="Output directory (its checkpoints/, writes/, blobs/ are replaced)."),
    thread: list[str] = O.Threads,
    values: bool = typer.Option(False, "--values", help="Also each blob's and write's decoded value, as JSON."),
    progress: Any = None,
) -> X.ExportReport:
    """Parquet export partitioned by dt=YYYY-MM-DD: checkpoints, writes, blob metadata (values with --values)."""
    return X.export_parquet(saver, to, thread_ids=thread or None, values=values, progress=progress)


@command("import", render=R.imported, opens="target", problems=lambda report: not report.ok,
         check=lambda options: official.check_source(options["source"]))
def import_(
    saver: Any,
    source: str = typer.Argument(..., help="Official LangGraph database: SqliteSaver file (path or sqlite:///path) or postgresql:// URL."),
    thread: list[str] = O.Threads,
    replace: bool = typer.Option(False, "--replace", help="Replace threads that already exist in the target."),
    verify: bool = typer.Option(True, "--verify/--no-verify", help="Compare every imported thread on both sides."),
    graph: str = O.Graph,
    progress: Any = None,
) -> official.ImportReport:
    """Import threads written by LangGraph's official SqliteSaver (or PostgresSaver) and verify them.

    The target must be named (--db or $THREADLINE_DB); the source is opened read-only."""
    return official.import_langgraph(source, saver, thread_ids=thread or None, verify=verify, replace=replace, graph=graph,
                                     progress=progress)
