"""Commands that change history: rollback, fork, delete, prune — each one call into ``threadline.lifecycle``."""

from __future__ import annotations

from typing import Any

import typer

from threadline import lifecycle
from threadline.cli import options as O
from threadline.cli.render import changes as R
from threadline.cli.shared import command, fail
from threadline.errors import ThreadlineError


@command("rollback", render=R.rollback)
def rollback(
    saver: Any,
    thread: str = typer.Argument(..., help="thread_id"),
    checkpoint: str = typer.Argument(..., help="checkpoint_id to return to"),
    ns: str = O.Ns,
) -> lifecycle.BranchResult:
    """Make an earlier checkpoint's state the head again, as a new branch (nothing is deleted)."""
    return lifecycle.rollback(saver, thread, checkpoint, checkpoint_ns=ns)


@command("fork", render=R.fork)
def fork(
    saver: Any,
    thread: str = typer.Argument(..., help="source thread_id"),
    checkpoint: str = typer.Argument(..., help="checkpoint_id whose state the new thread starts from"),
    to: str = typer.Option(..., "--to", help="new thread_id"),
    ns: str = O.Ns,
) -> lifecycle.BranchResult:
    """Start a new thread from the state at a checkpoint."""
    return lifecycle.fork(saver, thread, checkpoint, to, checkpoint_ns=ns)


@command("delete", render=R.delete)
def delete(
    saver: Any,
    thread: str = typer.Argument(..., help="thread_id"),
    checkpoint: str = typer.Argument(..., help="checkpoint_id"),
    ns: str = O.Ns,
    with_descendants: bool = typer.Option(False, "--with-descendants", help="Also delete every checkpoint below it."),
    reparent: bool = typer.Option(False, "--reparent", help="Attach its children to its parent instead."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only show what would be deleted."),
) -> lifecycle.DeletePlan:
    """Delete one checkpoint. Refuses when it has children unless --with-descendants or --reparent."""
    if with_descendants and reparent:
        fail("--with-descendants and --reparent exclude each other", 2)
    mode = "with_descendants" if with_descendants else "reparent" if reparent else "refuse"
    return lifecycle.delete_checkpoint(saver, thread, checkpoint, checkpoint_ns=ns, mode=mode, dry_run=dry_run)


@command("prune", render=R.prune)
def prune(
    saver: Any,
    keep_last: int = typer.Option(None, "--keep-last", min=1, help="Keep the newest N checkpoints per thread."),
    older_than: str = O.duration("--older-than", "Delete checkpoints older than this (e.g. 30d); heads stay."),
    idle: str = O.duration("--idle", "Delete whole threads idle longer than this (e.g. 90d)."),
    thread: list[str] = O.Threads,
    dry_run: bool = typer.Option(False, "--dry-run", help="List what would go and the bytes freed; change nothing."),
    progress: Any = None,
) -> lifecycle.PruneReport:
    """Apply retention policies; unreferenced blobs are garbage-collected; kept state stays readable."""
    try:
        policy = lifecycle.RetentionPolicy(keep_last=keep_last, older_than=older_than, idle_longer_than=idle)
    except ThreadlineError as exc:
        fail(str(exc), 2)
    return lifecycle.prune(saver, policy, thread_ids=thread or None, dry_run=dry_run, progress=progress)
