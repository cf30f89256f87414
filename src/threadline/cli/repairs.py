"""Consistency commands: fsck and rebuild — each one call into ``threadline.lifecycle``."""

from __future__ import annotations

from typing import Any

import typer

from threadline import lifecycle
from threadline.cli import options as O
from threadline.cli.render import changes as R
from threadline.cli.shared import command, fail


@command("fsck", render=R.fsck, problems=lambda report: not report.ok)
def fsck(
    saver: Any,
    repair: bool = typer.Option(False, "--repair", help="Fix what is safe: orphan writes/blobs, broken parent links, the threads index."),
    deep: bool = typer.Option(False, "--deep", help="Also decode every blob and write."),
    thread: list[str] = O.Threads,
    progress: Any = None,
) -> lifecycle.FsckReport:
    """Check consistency: dangling blob refs, orphan writes/blobs, unreadable rows, broken parent links."""
    return lifecycle.fsck(saver, thread_ids=thread or None, repair=repair, deep=deep, progress=progress)


@command("rebuild", render=R.rebuild)
def rebuild(
    saver: Any,
    thread: str = typer.Argument(..., help="thread_id"),
    checkpoint: str = typer.Argument(..., help="checkpoint_id to recompute"),
    graph: str = O.Graph,
    ns: str = O.Ns,
    apply: bool = typer.Option(False, "--apply", help="Write back blobs the checkpoint names but that are missing."),
) -> lifecycle.RebuildResult:
    """Recompute a checkpoint's values from its parent's state + writes with the graph's reducers."""
    if graph is None:
        fail("rebuild needs the compiled graph: --graph module:attr (or $THREADLINE_GRAPH)", 2)
    return lifecycle.rebuild(saver, graph, thread, checkpoint, checkpoint_ns=ns, apply=apply)
