"""Commands that change history: rollback, fork, delete, prune — each one call into
``threadline.lifecycle`` on the database named by --db or $THREADLINE_DB."""

from __future__ import annotations

from typing import Any

import typer

from threadline import lifecycle
from threadline.lifecycle import objects
from threadline.cli import options as O
from threadline.cli.render import changes as R
from threadline.cli.render.format import size
from threadline.cli.shared import command
from threadline.errors import ConfigError
from threadline.read import names


@command("rollback", render=R.rollback, opens="write")
def rollback(saver: Any, thread: str = O.Thread, checkpoint: str = O.checkpoint(), ns: str = O.Ns) -> lifecycle.BranchResult:
    """Make an earlier checkpoint's state the head again, as a new branch (nothing is deleted)."""
    cid = names.resolve_checkpoint(saver, thread, checkpoint, checkpoint_ns=ns)
    return lifecycle.rollback(saver, thread, cid, checkpoint_ns=ns)


@command("fork", render=R.fork, opens="write")
def fork(
    saver: Any,
    thread: str = O.Thread,
    checkpoint: str = O.checkpoint(),
    to: str = typer.Option(..., "--to", metavar="NEW_THREAD", help="The new thread_id."),
    ns: str = O.Ns,
) -> lifecycle.BranchResult:
    """Start a new thread from the state at a checkpoint."""
    cid = names.resolve_checkpoint(saver, thread, checkpoint, checkpoint_ns=ns)
    return lifecycle.fork(saver, thread, cid, to, checkpoint_ns=ns)


@command("delete", render=R.delete, opens="write")
def delete(
    saver: Any,
    thread: str = O.Thread,
    checkpoint: str = O.checkpoint(),
    ns: str = O.Ns,
    with_descendants: bool = typer.Option(False, "--with-descendants", help="Also delete every checkpoint below it."),
    reparent: bool = typer.Option(False, "--reparent", help="Attach its children to its parent instead."),
    dry_run: bool = O.DryRun,
    yes: bool = O.Yes,
    confirm: Any = None,
) -> lifecycle.DeletePlan:
    """Delete one checkpoint. Refused when it has children, unless --with-descendants or --reparent."""
    if with_descendants and reparent:
        raise ConfigError("--with-descendants and --reparent exclude each other: choose one")
    mode = "with_descendants" if with_descendants else "reparent" if reparent else "refuse"
    cid = names.resolve_checkpoint(saver, thread, checkpoint, checkpoint_ns=ns)
    if not dry_run:
        plan = lifecycle.delete_checkpoint(saver, thread, cid, checkpoint_ns=ns, mode=mode, dry_run=True)
        confirm(plan, f"Delete {len(plan.checkpoints)} checkpoint(s) of {thread}, freeing {size(plan.bytes_freed)}?")
    return _collected(saver, dry_run, lifecycle.delete_checkpoint(saver, thread, cid, checkpoint_ns=ns, mode=mode, dry_run=dry_run))


@command("prune", render=R.prune, opens="write")
def prune(
    saver: Any,
    keep_last: int = typer.Option(None, "--keep-last", min=1, metavar="N",
                                  help="Keep the newest N checkpoints of each branch (of each thread with --per thread)."),
    per: str = O.KeepLastPer,
    older_than: str = O.duration("--older-than", "Delete checkpoints older than this (e.g. 30d); heads stay."),
    idle: str = O.duration("--idle", "Delete whole threads idle longer than this (e.g. 90d)."),
    thread: list[str] = O.Threads,
    dry_run: bool = O.DryRun,
    yes: bool = O.Yes,
    verbose: bool = typer.Option(False, "--verbose", "-v", help="List every checkpoint, not only the per-thread summary."),
    limit: int = O.limit(20, "threads (largest first)"),
    offset: int = O.Offset,
    progress: Any = None,
    confirm: Any = None,
) -> lifecycle.PruneReport:
    """Apply a retention policy; blobs no kept checkpoint uses are deleted; kept state stays readable."""
    if keep_last is None and older_than is None and idle is None:
        raise ConfigError("prune needs a policy: --keep-last N, --older-than DURATION and/or --idle DURATION")
    policy = lifecycle.RetentionPolicy(keep_last=keep_last, older_than=older_than, idle_longer_than=idle, keep_last_per=per)
    ids = names.expand_threads(saver, thread) if thread else None
    if not dry_run:
        plan = lifecycle.prune(saver, policy, thread_ids=ids, dry_run=True, progress=progress)
        if plan.checkpoints:
            confirm(plan, f"Delete {plan.checkpoints} checkpoint(s) from {len(plan.plans)} thread(s), freeing {size(plan.bytes_freed)}?")
    return _collected(saver, dry_run, lifecycle.prune(saver, policy, thread_ids=ids, dry_run=dry_run, progress=progress))


def _collected(saver: Any, dry_run: bool, result: Any) -> Any:
    """``result``, once the objects of offloaded values no row names any more (older than the
    grace period) are deleted from the saver's object store, if it has one (``lifecycle.objects``)."""
    if not dry_run and objects.store_of(saver, saver.dialect) is not None:
        objects.collect(saver)
    return result
