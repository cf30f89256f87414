"""Read commands: threads, history, show, diff, audit, latest, stats — each one call into
``threadline.read`` on a database opened read-only, names resolved by ``read.names``."""

from __future__ import annotations

import time
from typing import Any

import typer

from threadline.cli import options as O
from threadline.cli.shared import command
from threadline.errors import ConfigError, NotFoundError
from threadline.lazy import LazyModule

# loaded when a command runs (``threadline --help`` loads none of them)
read = LazyModule("threadline.read")
objects = LazyModule("threadline.lifecycle.objects")
names = LazyModule("threadline.read.names")
statuses = LazyModule("threadline.read.status")
official = LazyModule("threadline.read.official")
transfer = LazyModule("threadline.transfer.official")
reader = LazyModule("threadline.store.reader")

ORDERS = ("updated", "created", "bytes", "thread_id", "updated_asc", "created_asc", "thread_id_desc")


def _order(value: str) -> str:
    if value not in ORDERS:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(ORDERS)}")
    return value


def _status(value: str | None) -> str | None:
    if value is not None and value not in statuses.STATUS_NAMES:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(statuses.STATUS_NAMES)}")
    return value


@command("threads", render="reads.threads", official=True, problems=lambda page: bool(page.damaged), lean=True)
def threads(
    saver: Any,
    where: list[str] = O.Where,
    idle: str = O.duration("--idle", "Only threads idle at least this long (e.g. 30d, 12h)."),
    active: str = O.duration("--active", "Only threads updated within this long."),
    limit: int = O.limit(50, "threads"),
    offset: int = O.Offset,
    order: str = typer.Option("updated", "--order", metavar="|".join(ORDERS), callback=_order,
                              help="Sort by: most recently updated, newest, largest, or thread_id (…_asc / _desc: the other way)."),
    meta: list[str] = O.Meta,
    status: str = typer.Option(None, "--status", metavar="STATUS", callback=_status,
                               help="Only threads of this status (idle, busy, interrupted, error) or kind (done, pending, errored, new)."),
    archived: bool = typer.Option(False, "--archived", help="List archived threads too (hidden by default)."),
) -> read.ThreadPage:
    """List threads: status, last update, checkpoints, size, head checkpoint and step, record metadata.

    A thread that cannot be read is listed as damaged, with the command that explains it; exit 1 then."""
    return read.list_threads(saver, metadata=O.metadata(where), idle_for=idle, active_within=active, limit=limit,
                             offset=offset, order_by=order, official=True, thread_metadata=O.metadata(meta) or None,
                             status=status, archived=None if archived else False, with_status=True)



@command("history", render="reads.history", official=True, thread="thread")
def history(
    saver: Any,
    thread: str = O.Thread,
    ns: str = O.Ns,
    subgraphs: bool = typer.Option(False, "--subgraphs", help="Also show subgraph runs under the checkpoint they started from."),
    limit: int = O.limit(100, "checkpoints, newest first"),
    offset: int = O.Offset,
    channel: str = typer.Option(None, "--channel", metavar="NAME", help="One channel through time: each version it took, "
                                "when, by which node, its size and what changed."),
    all_branches: bool = typer.Option(False, "--all-branches", help="With --channel: every branch, not only the head's."),
    full: bool = O.Full,
) -> Any:
    """The thread's checkpoints as a tree: branches, step, source, the nodes that wrote each, time, tags.

    With --channel NAME: the versions that channel took along the head branch (or every branch)."""
    tid = names.resolve_thread(saver, thread)
    if channel is not None:
        return read.channel_history(saver, tid, channel, checkpoint_ns=ns, all_branches=all_branches)
    if all_branches:
        raise ConfigError("--all-branches goes with --channel NAME (the tree always shows every branch)")
    return read.thread_history(saver, tid, checkpoint_ns=ns, include_subgraphs=subgraphs)


@command("show", render="reads.state", official=True, thread="thread")
def show(
    saver: Any,
    thread: str = O.Thread,
    checkpoint: str = O.checkpoint(False, O.CHECKPOINT_HELP + " Default: the head, with finished tasks' writes applied when --graph is given."),
    ns: str = O.Ns,
    graph: str = O.Graph,
    internal: bool = typer.Option(False, "--internal", help="Also show bookkeeping channels (branch:to:*, __start__, …)."),
    full: bool = O.Full,
) -> read.StateView:
    """The state at a checkpoint: values (messages as role: content), next nodes, pending writes, interrupts."""
    cid = None if checkpoint is None else names.resolve_checkpoint(saver, thread, checkpoint, checkpoint_ns=ns)
    return read.state_at(saver, names.resolve_thread(saver, thread), cid, checkpoint_ns=ns, graph=graph)


@command("diff", render="reads.diff", official=True, thread="thread")
def diff(
    saver: Any,
    thread: str = O.Thread,
    a: str = O.checkpoint(help="The checkpoint before (see CHECKPOINT of show); alone, the checkpoint to compare with its parent."),
    b: str = O.checkpoint(False, "The checkpoint after (omit it to see what A changed from its parent)."),
    ns: str = O.Ns,
    internal: bool = typer.Option(False, "--internal", help="Include bookkeeping channels."),
    full: bool = O.Full,
) -> read.StateDiff:
    """Per channel: added, removed, changed; messages by id (tool calls too), dicts key by key.

    With one checkpoint, what it changed from its parent."""
    if b is None:
        after = names.resolve_checkpoint(saver, thread, a, checkpoint_ns=ns)
        try:
            before = names.resolve_checkpoint(saver, thread, after + "^", checkpoint_ns=ns)
        except NotFoundError:
            raise NotFoundError(f"{a!r} is the first checkpoint of thread {thread!r}: it has no parent to compare with; "
                                "name two checkpoints (diff THREAD A B)") from None
    else:
        before, after = (names.resolve_checkpoint(saver, thread, x, checkpoint_ns=ns) for x in (a, b))
    return read.diff(saver, thread, before, after, checkpoint_ns=ns, include_internal=internal)


@command("audit", render="reads.audit", official=True, thread="thread")
def audit(
    saver: Any,
    thread: str = typer.Argument(None, metavar="[THREAD]", help="thread_id (omit for statistics over the whole database)."),
    checkpoint: str = O.checkpoint(False, "A checkpoint of THREAD (omit for the whole thread)."),
    ns: str = O.Ns,
    all_ns: bool = typer.Option(False, "--all-ns", help="Every namespace (subgraphs too)."),
    since: str = O.duration("--since", "Statistics over writes at most this old (e.g. 7d)."),
    limit: int = O.limit(100, "writes"),
    offset: int = O.Offset,
) -> dict[str, Any]:
    """Writes in execution order (node, task, channel, size, time), then per-node statistics."""
    space = None if all_ns else ns
    cid = names.resolve_checkpoint(saver, thread, checkpoint, checkpoint_ns=ns) if thread and checkpoint else None
    writes = read.audit(saver, names.resolve_thread(saver, thread), cid, checkpoint_ns=space, limit=limit, offset=offset) if thread else []
    stats = read.task_stats(saver, thread, cid, checkpoint_ns=space, since=None if since is None else time.time() - since)
    return {"writes": writes, "stats": stats}


def _expand(saver: Any, patterns: list[str]) -> list[str]:
    """The threads ``patterns`` name (``names.expand_threads``), official threads not adopted yet included."""
    scope = official.scope_of(saver, True)
    if not scope.official:
        return names.expand_threads(saver, patterns)
    known = [t.thread_id for t in saver.run(official.unadopted_threads_op(saver.dialect, scope))]
    if scope.threadline:
        known += saver.run(read.all_thread_ids_op(saver.dialect))
    return names.match_threads(patterns, known)


@command("latest", render="reads.latest", official=True)
def latest(
    saver: Any,
    channel: str = typer.Argument(..., metavar="CHANNEL", help="Channel name, e.g. messages."),
    threads: list[str] = typer.Argument(None, metavar="[THREAD]...",
                                        help="thread_ids or glob patterns (default: every thread, most recently updated first)."),
    ns: str = O.Ns,
    limit: int = O.limit(50, "threads"),
    offset: int = O.Offset,
    full: bool = O.Full,
) -> list[read.LatestValue]:
    """The value of one channel at the head of many threads (only that channel is decoded)."""
    if threads:
        ids = _expand(saver, threads)[offset:offset + limit]
    else:
        ids = [t.thread_id for t in read.list_threads(saver, limit=limit, offset=offset, official=True).threads]
    with transfer.thread_view(saver, ids, official=True) as view:  # the threads not adopted yet, as adopted
        viewed = set(getattr(view, "viewed", ())) if view is not saver else set()
        found = {v.thread_id: v for v in read.latest_values(saver, channel, [i for i in ids if i not in viewed], checkpoint_ns=ns)}
        if viewed:
            found.update((v.thread_id, v) for v in read.latest_values(view, channel, [i for i in ids if i in viewed], checkpoint_ns=ns))
    return [found[i] for i in ids if i in found]


@command("stats", render="reads.stats", problems=lambda s: bool(s.damaged), lean=True)
def stats(saver: Any, top: int = typer.Option(10, "--top", min=0, metavar="N", help="List the N largest threads.")) -> read.Stats:
    """Rows and bytes per table, store items and cache entries, the dedup ratio, the largest threads.

    Exit 1 when one of the threads listed cannot be read (shown as damaged)."""
    result = read.stats(saver, top=top)
    result.others = saver.run(reader.counts_op(saver.dialect))
    result.offloaded = objects.offload_summary(saver, result)
    return result
