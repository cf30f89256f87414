"""Transfer commands: Parquet export and import from LangGraph's official savers (``threadline.transfer``)."""

from __future__ import annotations

from typing import Any

import typer

from threadline.cli import options as O
from threadline.cli.shared import command
from threadline.lazy import LazyModule

# loaded when a command runs (``threadline --help`` loads none of them)
readonly = LazyModule("threadline.backends.readonly")
names = LazyModule("threadline.read.names")
adopt = LazyModule("threadline.storage.adopt")
X = LazyModule("threadline.transfer.export")
official = LazyModule("threadline.transfer.official")


@command("export", render="changes.export")
def export(
    saver: Any,
    to: str = typer.Option(..., "--to", metavar="DIR", help="Output directory (its checkpoints/, writes/, blobs/ are replaced)."),
    thread: list[str] = O.Threads,
    values: bool = typer.Option(False, "--values", help="Also each blob's and write's decoded value, as JSON."),
    progress: Any = None,
) -> X.ExportReport:
    """Parquet export partitioned by dt=YYYY-MM-DD: checkpoints, writes, blob metadata (values with --values)."""
    ids = names.expand_threads(saver, thread) if thread else None
    return X.export_parquet(saver, to, thread_ids=ids, values=values, progress=progress)


def _source_threads(options: dict[str, Any]) -> None:
    """The source must be an official saver's database; --thread names its threads (globs expanded)."""
    official.check_source(options["source"])
    if options["thread"]:
        with readonly.open_readonly(options["source"]) as (src, _):
            options["thread"] = names.match_threads(options["thread"], src.peek(adopt.official_thread_ids_op(src.dialect)))


@command("import", render="changes.imported", opens="target", problems=lambda report: not report.ok, prepare=_source_threads)
def import_(
    saver: Any,
    source: str = typer.Argument(..., metavar="SOURCE",
                                     help="An official LangGraph database: a SqliteSaver file (path or sqlite:///path) or a postgresql:// URL."),
    thread: list[str] = O.Threads,
    replace: bool = typer.Option(False, "--replace", help="Replace threads that already exist in the target."),
    verify: bool = typer.Option(True, "--verify/--no-verify", help="Compare every imported thread with its source."),
    graph: str = O.Graph,
    progress: Any = None,
) -> official.ImportReport:
    """Copy threads written by LangGraph's official SqliteSaver or PostgresSaver into the database named by --db.

    The source is opened read-only and never changed; the target (--db or $THREADLINE_DB)
    is created when missing. Exit 1 when a thread does not read back identically."""
    return official.import_langgraph(source, saver, thread_ids=thread or None, verify=verify, replace=replace,
                                     graph=graph, progress=progress)
