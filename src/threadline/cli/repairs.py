"""Consistency commands: fsck and rebuild (``threadline.lifecycle``), migrate-format, and setup. They
read unless told to repair (``fsck --repair``, ``rebuild --apply``), which needs --db or $THREADLINE_DB."""

from __future__ import annotations

from typing import Any

import typer

from threadline.cli import options as O
from threadline.cli.shared import command
from threadline.errors import ConfigError
from threadline.lazy import LazyModule

# loaded when a command runs (``threadline --help`` loads none of them)
lifecycle = LazyModule("threadline.lifecycle")
names = LazyModule("threadline.read.names")
ops = LazyModule("threadline.storage.ops")


@command("fsck", render="changes.fsck", problems=lambda report: not report.ok, opens=lambda o: "write" if o["repair"] else "read")
def fsck(
    saver: Any,
    repair: bool = typer.Option(False, "--repair", help="Fix what is safe: orphan writes/blobs, broken parent links, the threads index."),
    deep: bool = typer.Option(False, "--deep", help="Also decode every blob and write."),
    thread: list[str] = O.Threads,
    limit: int = O.limit(50, "findings"),
    offset: int = O.Offset,
    progress: Any = None,
) -> lifecycle.FsckReport:
    """Check consistency: dangling blob references, orphan writes/blobs, unreadable rows, broken parent links.

    Exit 1 when a problem remains."""
    ids = names.expand_threads(saver, thread) if thread else None
    return lifecycle.fsck(saver, thread_ids=ids, repair=repair, deep=deep, progress=progress)


@command("rebuild", render="changes.rebuild", opens=lambda o: "write" if o["apply"] else "read")
def rebuild(
    saver: Any,
    thread: str = O.Thread,
    checkpoint: str = O.checkpoint(),
    graph: str = O.Graph,
    ns: str = O.Ns,
    apply: bool = typer.Option(False, "--apply", help="Write back blobs the checkpoint names but that are missing."),
) -> lifecycle.RebuildResult:
    """Recompute a checkpoint's values from its parent's state and writes with the graph's reducers."""
    if graph is None:
        raise ConfigError("rebuild needs the compiled graph: --graph MODULE:ATTR (or $THREADLINE_GRAPH)")
    cid = names.resolve_checkpoint(saver, thread, checkpoint, checkpoint_ns=ns)
    return lifecycle.rebuild(saver, graph, thread, cid, checkpoint_ns=ns, apply=apply)


@command("migrate-format", render="changes.migrate_format", problems=lambda report: not report.ok, opens="write")
def migrate_format(saver: Any, thread: list[str] = O.Threads, progress: Any = None) -> lifecycle.FormatReport:
    """Bring the database to storage format 2: a head row for every namespace's latest checkpoint.

    Online and resumable (one transaction per thread; heads already current are skipped), each
    head verified as it is written. Optional: a put writes its thread's head anyway; threads
    without one read as before. Exit 1 when a thread could not be migrated."""
    ids = names.expand_threads(saver, thread) if thread else None
    return lifecycle.migrate_format(saver, thread_ids=ids, progress=progress)


@command("setup", render="changes.setup", opens="target")
def setup(saver: Any) -> dict[str, Any]:
    """Create threadline's tables in the database named by --db, or migrate them to this release."""
    state = saver.run(ops.schema_state(saver.dialect))
    return {"schema_version": max(state.applied, default=0), "official_saver_tables": state.official}
