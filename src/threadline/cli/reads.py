"""Read commands: threads, history, show, diff, audit, latest, stats — each one call into ``threadline.read``."""

from __future__ import annotations

import time
from typing import Any

import typer

from threadline import read
from threadline.cli import options as O
from threadline.cli.render import reads as R
from threadline.cli.shared import command


@command("threads", render=R.threads)
def threads(
    saver: Any,
    where: list[str] = O.Where,
    idle: str = O.duration("--idle", "Only threads idle at least this long (e.g. 30d, 12h)."),
    active: str = O.duration("--active", "Only threads updated within this long."),
    limit: int = typer.Option(50, "--limit", min=1, help="Page size."),
    offset: int = typer.Option(0, "--offset", min=0, help="Skip this many threads."),
    order: str = typer.Option("updated", "--order", help="updated | created | bytes | thread_id"),
) -> read.ThreadPage:
    """List threads: created/updated time, checkpoints, bytes, head step."""
    return read.list_threads(saver, metadata=O.metadata(where), idle_for=idle, active_within=active, limit=limit, offset=offset,
                             order_by=order)


@command("history", render=R.history)
def history(
    saver: Any,
    thread: str = typer.Argument(..., help="thread_id"),
    ns: str = O.Ns,
    subgraphs: bool = typer.Option(False, "--subgraphs", help="Also show subgraph runs under the checkpoint they started from."),
) -> read.ThreadHistory:
    """The thread's checkpoints as a tree: branches, step, source, writing nodes, time."""
    return read.thread_history(saver, thread, checkpoint_ns=ns, include_subgraphs=subgraphs)


@command("show", render=R.state)
def show(
    saver: Any,
    thread: str = typer.Argument(..., help="thread_id"),
    checkpoint: str = typer.Argument(None, help="checkpoint_id (default: the head; pending writes are then applied with --graph)"),
    ns: str = O.Ns,
    graph: str = O.Graph,
    internal: bool = typer.Option(False, "--internal", help="Also show bookkeeping channels (branch:to:*, __start__, …)."),
) -> read.StateView:
    """The state at a checkpoint: values, next nodes, pending writes, interrupts."""
    return read.state_at(saver, thread, checkpoint, checkpoint_ns=ns, graph=graph)


@command("diff", render=R.diff)
def diff(
    saver: Any,
    thread: str = typer.Argument(..., help="thread_id"),
    a: str = typer.Argument(..., help="checkpoint_id (before)"),
    b: str = typer.Argument(..., help="checkpoint_id (after)"),
    ns: str = O.Ns,
    internal: bool = typer.Option(False, "--internal", help="Include bookkeeping channels."),
) -> read.StateDiff:
    """Per channel: added, removed, changed; messages by id, dicts key by key."""
    return read.diff(saver, thread, a, b, checkpoint_ns=ns, include_internal=internal)


@command("audit", render=R.audit)
def audit(
    saver: Any,
    thread: str = typer.Argument(None, help="thread_id (omit for statistics over the whole database)"),
    checkpoint: str = typer.Argument(None, help="checkpoint_id (omit for the whole thread)"),
    ns: str = O.Ns,
    all_ns: bool = typer.Option(False, "--all-ns", help="Every namespace (subgraphs too)."),
    since: str = O.duration("--since", "Statistics over writes at most this old (e.g. 7d)."),
    limit: int = typer.Option(None, "--limit", help="Show at most this many writes."),
) -> dict[str, Any]:
    """Writes in execution order (task, idx, channel, task_path, bytes, time) and per-task statistics."""
    space = None if all_ns else ns
    writes = read.audit(saver, thread, checkpoint, checkpoint_ns=space, limit=limit) if thread else []
    stats = read.task_stats(saver, thread, checkpoint, checkpoint_ns=space, since=None if since is None else time.time() - since)
    return {"writes": writes, "stats": stats}


@command("latest", render=R.latest)
def latest(
    saver: Any,
    channel: str = typer.Argument(..., help="channel name, e.g. messages"),
    threads: list[str] = typer.Argument(None, help="thread_ids (default: every thread)"),
    ns: str = O.Ns,
    limit: int = typer.Option(None, "--limit", help="Without thread ids: the most recently updated N threads."),
) -> list[read.LatestValue]:
    """The latest value of one channel for many threads, through each thread's head checkpoint."""
    return read.latest_values(saver, channel, threads or None, checkpoint_ns=ns, limit=limit)


@command("stats", render=R.stats)
def stats(saver: Any, top: int = typer.Option(10, "--top", min=0, help="How many of the largest threads to list.")) -> read.Stats:
    """Counts and bytes per table, dedup ratio, top threads by size."""
    return read.stats(saver, top=top)
