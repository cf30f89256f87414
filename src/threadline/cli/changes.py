"""Commands that change history: rollback, fork, delete, prune, erase, and thread-set (a thread's record) — each one call into
``threadline.lifecycle`` on the database named by --db or $THREADLINE_DB."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import typer
from rich.markup import escape

from threadline.cli import options as O
from threadline.cli.shared import Db, command, named_db, opened, out
from threadline.errors import ConfigError
from threadline.lazy import LazyModule

# loaded when a command runs (``threadline --help`` loads none of them)
lifecycle = LazyModule("threadline.lifecycle")
objects = LazyModule("threadline.lifecycle.objects")
E = LazyModule("threadline.lifecycle.erase")
F = LazyModule("threadline.cli.render.format")
backends = LazyModule("threadline.backends")
names = LazyModule("threadline.read.names")
stores = LazyModule("threadline.store")
reader = LazyModule("threadline.store.reader")


@command("rollback", render="changes.rollback", opens="write")
def rollback(saver: Any, thread: str = O.Thread, checkpoint: str = O.checkpoint(), ns: str = O.Ns) -> lifecycle.BranchResult:
    """Make an earlier checkpoint's state the head again, as a new branch (nothing is deleted)."""
    cid = names.resolve_checkpoint(saver, thread, checkpoint, checkpoint_ns=ns)
    return lifecycle.rollback(saver, thread, cid, checkpoint_ns=ns)


@command("fork", render="changes.fork", opens="write")
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


@command("delete", render="changes.delete", opens="write")
def delete(
    saver: Any,
    thread: str = O.Thread,
    checkpoint: str = O.checkpoint(),
    ns: str = O.Ns,
    with_descendants: bool = typer.Option(False, "--with-descendants", help="Also delete every checkpoint below it."),
    reparent: bool = typer.Option(False, "--reparent", help="Attach its children to its parent instead."),
    force: bool = O.Force,
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
        plan = lifecycle.delete_checkpoint(saver, thread, cid, checkpoint_ns=ns, mode=mode, dry_run=True, force=force)
        confirm(plan, f"Delete {len(plan.checkpoints)} checkpoint(s) of {thread}, freeing {F.size(plan.bytes_freed)}?")
    return _collected(saver, dry_run, lifecycle.delete_checkpoint(saver, thread, cid, checkpoint_ns=ns, mode=mode, dry_run=dry_run, force=force))


@command("prune", render="changes.prune", opens="write")
def prune(
    saver: Any,
    keep_last: int = typer.Option(None, "--keep-last", min=1, metavar="N",
                                  help="Keep the newest N checkpoints of each branch (of each thread with --per thread)."),
    per: str = O.KeepLastPer,
    older_than: str = O.duration("--older-than", "Delete checkpoints older than this (e.g. 30d); heads stay."),
    idle: str = O.duration("--idle", "Delete whole threads idle longer than this (e.g. 90d)."),
    thread: list[str] = O.Threads,
    force: bool = O.Force,
    dry_run: bool = O.DryRun,
    yes: bool = O.Yes,
    verbose: bool = typer.Option(False, "--verbose", "-v", help="List every checkpoint, not only the per-thread summary."),
    limit: int = O.limit(20, "threads (largest first)"),
    offset: int = O.Offset,
    progress: Any = None,
    confirm: Any = None,
) -> lifecycle.PruneReport:
    """Apply a retention policy; blobs no kept checkpoint uses are deleted; kept state stays readable.

    Tagged checkpoints and pinned threads stay unless --force."""
    if keep_last is None and older_than is None and idle is None:
        raise ConfigError("prune needs a policy: --keep-last N, --older-than DURATION and/or --idle DURATION")
    policy = lifecycle.RetentionPolicy(keep_last=keep_last, older_than=older_than, idle_longer_than=idle, keep_last_per=per)
    ids = names.expand_threads(saver, thread) if thread else None
    if not dry_run:
        plan = lifecycle.prune(saver, policy, thread_ids=ids, dry_run=True, progress=progress, force=force)
        if plan.checkpoints:
            confirm(plan, f"Delete {plan.checkpoints} checkpoint(s) from {len(plan.plans)} thread(s), freeing {F.size(plan.bytes_freed)}?")
    return _collected(saver, dry_run, lifecycle.prune(saver, policy, thread_ids=ids, dry_run=dry_run, progress=progress, force=force))


def _collected(saver: Any, dry_run: bool, result: Any) -> Any:
    """``result``, once the objects of offloaded values no row names any more (older than the
    grace period) are deleted from the saver's object store, if it has one (``lifecycle.objects``)."""
    if not dry_run and objects.store_of(saver, saver.dialect) is not None:
        objects.collect(saver)
    return result


def _erased(r: E.ErasureReceipt, **_: Any) -> None:
    c = r.to_json()["counts"]
    what = (f"{c['threads']} thread(s) ({c['checkpoints']} checkpoints, {c['blobs']} values, {c['writes']} pending writes; "
            f"{F.size(sum(r.bytes.values()))} stored)")
    objects = "".join(f", {c[kind]} {label} ({F.size(r.object_bytes[kind])})" for kind, label in
                      (("cold_archives", "cold archive(s)"), ("objects", "offloaded value(s)")) if c[kind])
    kept = f", {r.kept_objects} offloaded value(s) kept (other threads hold the same value)" if r.kept_objects else ""
    items = "".join(f", {n} Store item(s) under {escape(ns)}" for ns, n in r.store_items.items())
    verb = "[yellow]would erase[/yellow]" if r.dry_run else "[green]erased[/green]"
    out.print(f"{verb} {what}{objects}{kept}{items}")
    if r.threads:
        out.print("threads: " + escape(", ".join(r.threads[:10])) + (f" … and {len(r.threads) - 10} more" if len(r.threads) > 10 else ""))
    if r.space is not None and r.space.bytes_before is not None:
        out.print(f"on disk: {F.size(r.space.bytes_before)} → {F.size(r.space.bytes_after)} ({F.size(r.space.bytes_freed)} freed)")
    if r.verified is not None and not r.problems:
        out.print("verified: the selection, the Store search and the object store find nothing of it")
    for p in r.problems:
        out.print(f"[red]problem[/red] {escape(p)}")


@command("erase", opens="none", render=_erased, problems=lambda r: bool(r.problems))
def erase(
    url: str = Db,  # --db (named apart: ``command`` takes ``db`` for the databases it opens itself)
    thread_pattern: str = typer.Option(None, "--thread-pattern", metavar="GLOB",
                                       help="Threads whose id matches ('user-42-*'; * and ? wildcards; no wildcard: that id exactly)."),
    where: list[str] = O.Where,
    store_namespace: list[str] = typer.Option(None, "--store-namespace", metavar="NAMESPACE",
                                              help="Also erase the Store items under this namespace (labels joined with dots; repeatable)."),
    receipt: str = typer.Option(None, "--receipt", metavar="FILE",
                                help="Write the receipt (JSON) here; a receipt of an interrupted run of the same selection is continued."),
    dry_run: bool = O.DryRun,
    yes: bool = O.Yes,
    confirm: Any = None,
) -> E.ErasureReceipt:
    """Erase a user's or tenant's data: threads by id pattern and/or metadata (cold ones included, with the objects only they name), Store items by namespace; then reclaim the space and verify."""
    db = named_db(url, "erase")
    selection = E.Selection(thread_pattern, O.metadata(where) or None, tuple(reader.namespace(n) for n in store_namespace or ()))
    name = backends.entry_of(db).get("describe")(db)
    with opened(db, "write", "erase") as saver, (stores.open_store(db) if selection.store_namespaces else nullcontext()) as store:
        if not dry_run:
            plan = E.erase(saver, selection, store=store, dry_run=True, database=name)
            if plan.threads or any(plan.store_items.values()):  # nothing to erase: verified and receipted without asking
                objects = f", {plan.objects + plan.cold_archives} object(s) of the object store" if plan.objects + plan.cold_archives else ""
                confirm(plan, f"Erase {len(plan.threads)} thread(s){objects} and {sum(plan.store_items.values())} Store item(s)? This cannot be undone.")
        return E.erase(saver, selection, store=store, dry_run=dry_run, receipt=receipt, database=name)


def _record(r: Any, **_: Any) -> None:
    import json

    from threadline.cli.shared import out

    state = " (archived)" if r.archived else ""
    out.print(f"thread {r.thread_id}{state}: {json.dumps(r.metadata, ensure_ascii=False, default=str)}", soft_wrap=True, markup=False)


@command("thread-set", render=_record, opens="write")
def thread_set(
    saver: Any,
    thread: str = O.Thread,
    items: list[str] = typer.Argument(None, metavar="KEY=VALUE...", show_default=False,
                                      help="Record metadata to set (VALUE read as JSON when it is; KEY=null removes KEY)."),
    archive: bool = typer.Option(None, "--archive/--unarchive", help="Archive the thread (hidden from `threads`) or bring it back."),
    replace: bool = typer.Option(False, "--replace", help="Replace the whole metadata instead of merging the keys given."),
) -> Any:
    """Set a thread's record — its own metadata (title, owner, tags, …) and archived flag — without writing a checkpoint."""
    for item in items or []:
        if "=" not in item:
            raise typer.BadParameter(f"expects KEY=VALUE, got {item!r}")
    return lifecycle.update_thread(saver, thread, O.metadata(items), archived=archive, replace=replace)
