"""The state lifecycle commands: a thin typer + rich skin over ``threadline.read``,
``threadline.lifecycle`` and ``threadline.transfer.export``.

Every command takes ``--db URL`` (default ``$THREADLINE_DB`` or the demo database)
and ``--json`` (machine-readable output on stdout; progress and errors go to
stderr). Exit codes: 0 success, 1 refused or failed (the message says why),
2 bad usage. See docs/cli.md.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.tree import Tree

from threadline.cli import DbOption, app, default_db
from threadline.errors import ThreadlineError

JsonOption = typer.Option(False, "--json", help="Print JSON on stdout instead of tables.")
NsOption = typer.Option("", "--ns", help="checkpoint_ns (default: the root graph '').")
GraphOption = typer.Option(
    None, "--graph", help="Compiled graph as module:attr (default $THREADLINE_GRAPH), e.g. threadline.demo:build_graph."
)

out = Console()
err = Console(stderr=True)


# --- plumbing ------------------------------------------------------------------------


def _fail(message: str, code: int = 1) -> None:
    err.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code)


@contextmanager
def _saver(db: str | None, *, must_exist: bool = True) -> Iterator[Any]:
    from threadline.backends.sqlite import path_of
    from threadline.backends import backend_of, open_saver

    url = db or default_db()
    try:
        if must_exist and backend_of(url) == "sqlite":
            path = path_of(url)
            if path != ":memory:" and not os.path.exists(path):
                _fail(f"no database at {path!r} (pass --db, set $THREADLINE_DB, or run `threadline demo`)")
        with open_saver(url) as saver:
            yield saver
    except typer.Exit:
        raise
    except (ThreadlineError, ValueError, LookupError) as exc:
        _fail(str(exc))


def _emit(data: Any) -> None:
    typer.echo(json.dumps(data, ensure_ascii=False, default=str, indent=None))


def _progress(enabled: bool) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not enabled,
    )


def _tick(progress: Progress, task: Any) -> Callable[[int, int, str], None]:
    def update(done: int, total: int, what: str) -> None:
        progress.update(task, completed=done, total=total, description=f"{what[:40]}")

    return update


def _short(cid: str | None) -> str:
    return "-" if not cid else cid


def _when(ts: float | None) -> str:
    from threadline.read import iso

    text = iso(ts)
    return text[:19].replace("T", " ") if text else "-"


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _brief(value: Any, width: int = 100) -> str:
    from threadline.read import jsonable

    text = json.dumps(jsonable(value), ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def _graph(spec: str | None) -> Any:
    from threadline.read import load_graph

    spec = spec or os.environ.get("THREADLINE_GRAPH")
    if not spec:
        return None
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return load_graph(spec)
    except ThreadlineError as exc:
        _fail(str(exc), 2)


def _parse_where(items: list[str] | None) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            _fail(f"--where expects key=value, got {item!r}", 2)
        key, raw = item.split("=", 1)
        try:
            result[key] = json.loads(raw)
        except ValueError:
            result[key] = raw
    return result


def _duration(text: str | None, option: str) -> float | None:
    from threadline.read import parse_duration

    if text is None:
        return None
    try:
        return parse_duration(text)
    except ValueError as exc:
        _fail(f"{option}: {exc}", 2)
    return None


# --- threads ------------------------------------------------------------------------------


@app.command("threads")
def threads_cmd(
    db: str = DbOption,
    where: list[str] = typer.Option(None, "--where", help="Metadata filter key=value (value parsed as JSON if it is). Repeatable."),
    idle: str = typer.Option(None, "--idle", help="Only threads idle at least this long (e.g. 30d, 12h)."),
    active: str = typer.Option(None, "--active", help="Only threads updated within this long."),
    limit: int = typer.Option(50, "--limit", min=1, help="Page size."),
    offset: int = typer.Option(0, "--offset", min=0, help="Skip this many threads."),
    order: str = typer.Option("updated", "--order", help="updated | created | bytes | thread_id"),
    as_json: bool = JsonOption,
) -> None:
    """List threads: created/updated time, checkpoints, bytes, head step."""
    from threadline import read as H

    with _saver(db) as saver:
        page = H.list_threads(
            saver,
            metadata=_parse_where(where),
            idle_for=_duration(idle, "--idle"),
            active_within=_duration(active, "--active"),
            limit=limit,
            offset=offset,
            order_by=order,
        )
    if as_json:
        return _emit(page.to_json())
    table = Table(title=f"threads {page.offset + 1 if page.threads else 0}–{page.offset + len(page.threads)} of {page.total}")
    for col in ("thread_id", "created", "updated", "checkpoints", "bytes", "head step", "head checkpoint"):
        table.add_column(col, justify="right" if col in ("checkpoints", "bytes", "head step") else "left", overflow="fold")
    for t in page.threads:
        table.add_row(
            escape(t.thread_id), _when(t.created_at), _when(t.updated_at), str(t.checkpoint_count), _size(t.bytes),
            "-" if t.head_step is None else str(t.head_step), _short(t.head_checkpoint_id),
        )
    out.print(table)
    if page.next_offset is not None:
        out.print(f"[dim]more: --offset {page.next_offset}[/dim]")


# --- history --------------------------------------------------------------------------------


@app.command("history")
def history_cmd(
    thread: str = typer.Argument(..., help="thread_id"),
    db: str = DbOption,
    ns: str = NsOption,
    subgraphs: bool = typer.Option(False, "--subgraphs", help="Also show subgraph runs under the checkpoint they started from."),
    as_json: bool = JsonOption,
) -> None:
    """The thread's checkpoints as a tree: branches, step, source, writing nodes, time."""
    from threadline import read as H

    with _saver(db) as saver:
        h = H.thread_history(saver, thread, checkpoint_ns=ns, include_subgraphs=subgraphs)
    if as_json:
        return _emit(h.to_json())
    root_ns = "" if subgraphs else ns
    tree = Tree(f"[bold]{escape(h.thread_id)}[/bold]  head {h.head}  ({len(h.nodes.get(root_ns, {}))} checkpoints, "
                f"{len(h.fork_points)} fork point(s))")

    def label(n: H.CheckpointNode) -> str:
        marks = []
        if n.is_head:
            marks.append("[bold green]HEAD[/bold green]")
        if n.is_fork_point:
            marks.append(f"[yellow]fork point ({len(n.children)} branches)[/yellow]")
        if n.interrupted:
            marks.append("[magenta]interrupted[/magenta]")
        op = n.metadata.get("threadline_op")
        if op:
            src = n.metadata.get("forked_from") or {}
            marks.append(f"[cyan]{op} of {src.get('checkpoint_id')}[/cyan]")
        style = "" if n.on_head_path or n.checkpoint_ns else "[dim]"
        end = "[/dim]" if style else ""
        writers = ",".join(n.writers) or "-"
        return (f"{style}{n.checkpoint_id}  step {n.step}  {n.source or '?'}  by {escape(writers)}  "
                f"{_when(n.created_at)}  writes {n.pending_writes}{end} " + " ".join(marks))

    def add(parent: Tree, space: str, cid: str) -> None:
        # a linear run of checkpoints is listed at one level; each branch of a fork point nests
        cur: str | None = cid
        while cur is not None:
            n = h.nodes[space][cur]
            item = parent.add(label(n))
            for sub in n.subgraphs:
                st = item.add(f"[blue]subgraph {escape(sub)}[/blue]")
                for r in h.roots.get(sub, []):
                    add(st, sub, r)
            if len(n.children) == 1:
                cur = n.children[0]
            else:
                for i, child in enumerate(n.children, 1):
                    add(item.add(f"[yellow]branch {i}[/yellow]"), space, child)
                cur = None

    for r in h.roots.get(root_ns, []):
        add(tree, root_ns, r)
    out.print(tree)


# --- show -------------------------------------------------------------------------------------


@app.command("show")
def show_cmd(
    thread: str = typer.Argument(..., help="thread_id"),
    checkpoint: str = typer.Argument(None, help="checkpoint_id (default: the head; pending writes are then applied with --graph)"),
    db: str = DbOption,
    ns: str = NsOption,
    graph: str = GraphOption,
    internal: bool = typer.Option(False, "--internal", help="Also show bookkeeping channels (branch:to:*, __start__, …)."),
    as_json: bool = JsonOption,
) -> None:
    """The state at a checkpoint: values, next nodes, pending writes, interrupts."""
    from threadline import read as H

    g = _graph(graph)
    with _saver(db) as saver:
        view = H.state_at(saver, thread, checkpoint, checkpoint_ns=ns, graph=g)
    if as_json:
        return _emit(view.to_json())
    head = " [bold green]HEAD[/bold green]" if view.is_head else ""
    out.print(f"[bold]{escape(view.thread_id)}[/bold] @ {view.checkpoint_id}{head}  step {view.step}  {view.source}  "
              f"{_when(view.created_at)}  parent {_short(view.parent_checkpoint_id)}")
    table = Table(title="values" + (" (pending writes applied)" if view.pending_applied else ""), show_lines=False)
    table.add_column("channel")
    table.add_column("version")
    table.add_column("value", overflow="fold")
    shown = {**view.values, **(view.internal if internal else {})}
    for ch in sorted(shown):
        table.add_row(escape(ch), str(view.channel_versions.get(ch, "-")), escape(_brief(shown[ch], 400)))
    out.print(table)
    out.print(f"next: {', '.join(view.next) or '(none)'}")
    if view.pending_writes:
        pw = Table(title="pending writes")
        for col in ("node", "task_id", "idx", "channel", "value"):
            pw.add_column(col)
        for w in view.pending_writes:
            pw.add_row(escape(w.node or "?"), w.task_id, str(w.idx), escape(w.channel), escape(_brief(w.value, 80)))
        out.print(pw)
        if not view.pending_applied and view.is_head:
            out.print("[dim]pending writes are not folded into values without the graph's reducers: pass --graph module:attr[/dim]")
    for i in view.interrupts:
        out.print(f"[magenta]interrupt[/magenta] {i.get('id')}: {escape(_brief(i.get('value'), 200))}")


# --- diff ---------------------------------------------------------------------------------------


@app.command("diff")
def diff_cmd(
    thread: str = typer.Argument(..., help="thread_id"),
    a: str = typer.Argument(..., help="checkpoint_id (before)"),
    b: str = typer.Argument(..., help="checkpoint_id (after)"),
    db: str = DbOption,
    ns: str = NsOption,
    internal: bool = typer.Option(False, "--internal", help="Include bookkeeping channels."),
    as_json: bool = JsonOption,
) -> None:
    """Per channel: added, removed, changed; messages by id, dicts key by key."""
    from threadline import read as H

    with _saver(db) as saver:
        d = H.diff(saver, thread, a, b, checkpoint_ns=ns, include_internal=internal)
    if as_json:
        return _emit(d.to_json())
    out.print(f"[bold]{escape(d.thread_id)}[/bold]  {d.a} → {d.b}")
    if not d.channels:
        out.print("no differences" + (f" (unchanged: {', '.join(d.unchanged)})" if d.unchanged else ""))
        return
    tree = Tree("channels")
    for ch, change in d.channels.items():
        colour = {"added": "green", "removed": "red", "changed": "yellow"}[change["kind"]]
        node = tree.add(f"[{colour}]{change['kind']}[/{colour}] {escape(ch)}")
        if "messages" in change:
            m = change["messages"]
            for msg in m["added"]:
                node.add(f"[green]+ message {escape(str(msg.get('id')))}[/green] {escape(_brief(msg.get('content'), 100))}")
            for e in m["edited"]:
                node.add(f"[yellow]~ message {escape(str(e['id']))}[/yellow] {escape(_brief(e['before'].get('content'), 50))} → "
                         f"{escape(_brief(e['after'].get('content'), 50))}")
            for msg in m["removed"]:
                node.add(f"[red]- message {escape(str(msg.get('id')))}[/red] {escape(_brief(msg.get('content'), 100))}")
        elif "keys" in change:
            k = change["keys"]
            for key, v in k["added"].items():
                node.add(f"[green]+ {escape(key)}[/green] = {escape(_brief(v, 100))}")
            for key, v in k["changed"].items():
                node.add(f"[yellow]~ {escape(key)}[/yellow] {escape(_brief(v['before'], 50))} → {escape(_brief(v['after'], 50))}")
            for key, v in k["removed"].items():
                node.add(f"[red]- {escape(key)}[/red] = {escape(_brief(v, 100))}")
        else:
            if "before" in change:
                node.add(f"[red]- {escape(_brief(change['before'], 120))}[/red]")
            if "after" in change:
                node.add(f"[green]+ {escape(_brief(change['after'], 120))}[/green]")
    out.print(tree)
    if d.unchanged:
        out.print(f"[dim]unchanged (same blob): {', '.join(d.unchanged)}[/dim]")


# --- audit -----------------------------------------------------------------------------------------


@app.command("audit")
def audit_cmd(
    thread: str = typer.Argument(None, help="thread_id (omit for statistics over the whole database)"),
    checkpoint: str = typer.Argument(None, help="checkpoint_id (omit for the whole thread)"),
    db: str = DbOption,
    ns: str = NsOption,
    all_ns: bool = typer.Option(False, "--all-ns", help="Every namespace (subgraphs too)."),
    since: str = typer.Option(None, "--since", help="Statistics over writes at most this old (e.g. 7d)."),
    limit: int = typer.Option(None, "--limit", help="Show at most this many writes."),
    as_json: bool = JsonOption,
) -> None:
    """Writes in execution order (task, idx, channel, task_path, bytes, time) and per-task statistics."""
    import time

    from threadline import read as H

    space = None if all_ns else ns
    age = _duration(since, "--since")
    with _saver(db) as saver:
        writes = H.audit(saver, thread, checkpoint, checkpoint_ns=space, limit=limit) if thread else []
        stats = H.task_stats(saver, thread, checkpoint, checkpoint_ns=space, since=None if age is None else time.time() - age)
    if as_json:
        return _emit({"writes": [w.to_json() for w in writes], "stats": stats.to_json()})
    if thread:
        table = Table(title=f"writes of {thread}" + (f" @ {checkpoint}" if checkpoint else ""))
        cols = ["checkpoint", "node", "task_id", "idx", "channel", "task_path", "bytes", "time"]
        if all_ns:
            cols.insert(0, "ns")
        for col in cols:
            table.add_column(col, justify="right" if col in ("idx", "bytes") else "left", overflow="fold")
        for w in writes:
            row = [w.checkpoint_id, escape(w.node or "?"), w.task_id, str(w.idx), escape(w.channel), escape(w.task_path),
                   str(w.bytes), _when(w.created_at)]
            if all_ns:
                row.insert(0, escape(w.checkpoint_ns))
            table.add_row(*row)
        out.print(table)
    st = Table(title="per task" + (f" — {thread}" if thread else " — whole database"))
    for col in ("node", "writes", "tasks", "total bytes", "avg bytes"):
        st.add_column(col, justify="left" if col == "node" else "right")
    for t in stats.tasks:
        st.add_row(escape(t.node), str(t.writes), str(t.tasks), str(t.total_bytes), f"{t.avg_bytes:.1f}")
    out.print(st)
    line = f"writes {stats.writes} rows / {_size(stats.writes_bytes)}  vs  blobs {stats.blobs} rows / {_size(stats.blobs_bytes)}"
    if stats.new_blobs_bytes is not None:
        line += f"  (new at this checkpoint: {_size(stats.new_blobs_bytes)})"
    out.print(line)


# --- rollback / fork --------------------------------------------------------------------------------


@app.command("rollback")
def rollback_cmd(
    thread: str = typer.Argument(..., help="thread_id"),
    checkpoint: str = typer.Argument(..., help="checkpoint_id to return to"),
    db: str = DbOption,
    ns: str = NsOption,
    as_json: bool = JsonOption,
) -> None:
    """Make an earlier checkpoint's state the head again, as a new branch (nothing is deleted)."""
    from threadline import lifecycle as L

    with _saver(db) as saver:
        r = L.rollback(saver, thread, checkpoint, checkpoint_ns=ns)
    if as_json:
        return _emit(r.to_json())
    out.print(f"[green]rolled back[/green] {escape(thread)}: new head {r.checkpoint_id} (parent {r.parent_checkpoint_id}) "
              f"carries the state of {r.source_checkpoint_id}; previous head {r.previous_head} kept on its branch")


@app.command("fork")
def fork_cmd(
    thread: str = typer.Argument(..., help="source thread_id"),
    checkpoint: str = typer.Argument(..., help="checkpoint_id whose state the new thread starts from"),
    to: str = typer.Option(..., "--to", help="new thread_id"),
    db: str = DbOption,
    ns: str = NsOption,
    as_json: bool = JsonOption,
) -> None:
    """Start a new thread from the state at a checkpoint."""
    from threadline import lifecycle as L

    with _saver(db) as saver:
        r = L.fork(saver, thread, checkpoint, to, checkpoint_ns=ns)
    if as_json:
        return _emit(r.to_json())
    out.print(f"[green]forked[/green] {escape(thread)}@{checkpoint} → thread {escape(to)} head {r.checkpoint_id} "
              f"({r.blobs_copied} blob rows copied)")


# --- delete / prune -----------------------------------------------------------------------------------


def _print_plans(plans: list[Any], dry_run: bool) -> None:
    table = Table(title="would delete" if dry_run else "deleted")
    for col in ("thread_id", "checkpoints", "writes", "blobs", "bytes freed", "thread"):
        table.add_column(col, justify="left" if col == "thread_id" else "right")
    for p in plans:
        table.add_row(escape(p.thread_id), str(len(p.checkpoints)), str(p.writes), str(p.blobs), _size(p.bytes_freed),
                      "deleted" if p.thread_deleted else "kept")
    out.print(table)


@app.command("delete")
def delete_cmd(
    thread: str = typer.Argument(..., help="thread_id"),
    checkpoint: str = typer.Argument(..., help="checkpoint_id"),
    db: str = DbOption,
    ns: str = NsOption,
    with_descendants: bool = typer.Option(False, "--with-descendants", help="Also delete every checkpoint below it."),
    reparent: bool = typer.Option(False, "--reparent", help="Attach its children to its parent instead."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only show what would be deleted."),
    as_json: bool = JsonOption,
) -> None:
    """Delete one checkpoint. Refuses when it has children unless --with-descendants or --reparent."""
    from threadline import lifecycle as L

    if with_descendants and reparent:
        _fail("--with-descendants and --reparent exclude each other", 2)
    mode = "with_descendants" if with_descendants else "reparent" if reparent else "refuse"
    with _saver(db) as saver:
        plan = L.delete_checkpoint(saver, thread, checkpoint, checkpoint_ns=ns, mode=mode, dry_run=dry_run)
    if as_json:
        return _emit(plan.to_json())
    _print_plans([plan], dry_run)
    for ns_, cid in plan.checkpoints:
        out.print(f"  {'would delete' if dry_run else 'deleted'} {escape(ns_ or '(root)')} {cid}")
    for cid, parent in plan.reparented.items():
        out.print(f"  {cid}: parent → {parent or '(none: root)'}")


@app.command("prune")
def prune_cmd(
    db: str = DbOption,
    keep_last: int = typer.Option(None, "--keep-last", min=1, help="Keep the newest N checkpoints per thread."),
    older_than: str = typer.Option(None, "--older-than", help="Delete checkpoints older than this (e.g. 30d); heads stay."),
    idle: str = typer.Option(None, "--idle", help="Delete whole threads idle longer than this (e.g. 90d)."),
    thread: list[str] = typer.Option(None, "--thread", help="Only these threads (repeatable)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="List what would go and the bytes freed; change nothing."),
    as_json: bool = JsonOption,
) -> None:
    """Apply retention policies; unreferenced blobs are garbage-collected; kept state stays readable."""
    from threadline import lifecycle as L

    try:
        policy = L.RetentionPolicy(keep_last=keep_last, older_than=_duration(older_than, "--older-than"),
                                   idle_longer_than=_duration(idle, "--idle"))
    except ThreadlineError as exc:
        _fail(str(exc), 2)
    with _saver(db) as saver, _progress(not as_json) as progress:
        task = progress.add_task("prune", total=None)
        report = L.prune(saver, policy, thread_ids=thread or None, dry_run=dry_run, progress=_tick(progress, task))
    if as_json:
        return _emit(report.to_json())
    _print_plans(report.plans, dry_run)
    if dry_run:
        for p in report.plans:
            for ns_, cid in p.checkpoints:
                out.print(f"  {escape(p.thread_id)} {escape(ns_ or '(root)')} {cid}")
    verb = "would free" if dry_run else "freed"
    out.print(f"{report.checkpoints} checkpoint(s), {verb} {_size(report.bytes_freed)}"
              + (f"; threads deleted: {', '.join(report.threads_deleted)}" if report.threads_deleted else ""))


# --- rebuild / fsck -------------------------------------------------------------------------------------


@app.command("rebuild")
def rebuild_cmd(
    thread: str = typer.Argument(..., help="thread_id"),
    checkpoint: str = typer.Argument(..., help="checkpoint_id to recompute"),
    graph: str = GraphOption,
    db: str = DbOption,
    ns: str = NsOption,
    apply: bool = typer.Option(False, "--apply", help="Write back blobs the checkpoint names but that are missing."),
    as_json: bool = JsonOption,
) -> None:
    """Recompute a checkpoint's values from its parent's state + writes with the graph's reducers."""
    from threadline import lifecycle as L

    g = _graph(graph)
    if g is None:
        _fail("rebuild needs the compiled graph: --graph module:attr (or $THREADLINE_GRAPH)", 2)
    with _saver(db) as saver:
        r = L.rebuild(saver, g, thread, checkpoint, checkpoint_ns=ns, apply=apply)
    if as_json:
        return _emit(r.to_json())
    out.print(f"[bold]{escape(thread)}[/bold] @ {r.checkpoint_id} rebuilt from parent {r.parent_checkpoint_id}")
    out.print(f"[green]matches[/green]: {', '.join(r.matches) or '-'}")
    for ch, change in r.differs.items():
        out.print(f"[yellow]differs[/yellow] {escape(ch)}: {escape(_brief(change, 200))}")
    if r.missing:
        out.print(f"[red]missing blobs[/red]: {', '.join(r.missing)}" + (" — restored" if r.restored else " (use --apply to restore)"))


@app.command("fsck")
def fsck_cmd(
    db: str = DbOption,
    repair: bool = typer.Option(False, "--repair", help="Fix what is safe: orphan writes/blobs, broken parent links, the threads index."),
    deep: bool = typer.Option(False, "--deep", help="Also decode every blob and write."),
    thread: list[str] = typer.Option(None, "--thread", help="Only these threads (repeatable)."),
    as_json: bool = JsonOption,
) -> None:
    """Check consistency: dangling blob refs, orphan writes/blobs, unreadable rows, broken parent links."""
    from threadline import lifecycle as L

    with _saver(db) as saver, _progress(not as_json) as progress:
        task = progress.add_task("fsck", total=None)
        report = L.fsck(saver, thread_ids=thread or None, repair=repair, deep=deep, progress=_tick(progress, task))
    if as_json:
        _emit(report.to_json())
    else:
        if not report.findings:
            out.print(f"[green]ok[/green]: {report.threads_checked} thread(s) checked, no problem found")
        else:
            table = Table(title=f"fsck: {report.threads_checked} thread(s)")
            for col in ("kind", "thread_id", "ns", "checkpoint", "detail", "repair"):
                table.add_column(col, overflow="fold")
            for f in report.findings:
                fix = "repaired" if f.repaired else ("safe: --repair" if f.repairable else "manual")
                table.add_row(f.kind, escape(f.thread_id), escape(f.checkpoint_ns or ""), f.checkpoint_id or "", escape(f.detail), fix)
            out.print(table)
    if not report.ok:
        raise typer.Exit(1)


# --- latest / stats -----------------------------------------------------------------------------------------


@app.command("latest")
def latest_cmd(
    channel: str = typer.Argument(..., help="channel name, e.g. messages"),
    threads: list[str] = typer.Argument(None, help="thread_ids (default: every thread)"),
    db: str = DbOption,
    ns: str = NsOption,
    limit: int = typer.Option(None, "--limit", help="Without thread ids: the most recently updated N threads."),
    as_json: bool = JsonOption,
) -> None:
    """The latest value of one channel for many threads, through each thread's head checkpoint."""
    from threadline import read as H

    with _saver(db) as saver:
        rows = H.latest_values(saver, channel, threads or None, checkpoint_ns=ns, limit=limit)
    if as_json:
        return _emit([r.to_json() for r in rows])
    table = Table(title=f"latest {channel}")
    for col in ("thread_id", "head checkpoint", "version", "value"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(escape(r.thread_id), r.checkpoint_id, str(r.version or "-"),
                      escape(_brief(r.value, 200)) if r.present else "[dim](no value)[/dim]")
    out.print(table)


@app.command("stats")
def stats_cmd(
    db: str = DbOption,
    top: int = typer.Option(10, "--top", min=0, help="How many of the largest threads to list."),
    as_json: bool = JsonOption,
) -> None:
    """Counts and bytes per table, dedup ratio, top threads by size."""
    from threadline import read as H

    with _saver(db) as saver:
        s = H.stats(saver, top=top)
    if as_json:
        return _emit(s.to_json())
    table = Table(title="tables")
    for col in ("table", "rows", "bytes"):
        table.add_column(col, justify="left" if col == "table" else "right")
    for name, t in s.tables.items():
        table.add_row(name, str(t["rows"]), _size(t["bytes"]))
    table.add_row("threads", str(s.threads), "")
    out.print(table)
    out.print(f"checkpoints reference {s.references} (channel, version) pairs stored as {s.tables['blobs']['rows']} blob rows: "
              f"dedup ratio {s.dedup_ratio}×; a full copy per checkpoint would store {_size(s.logical_blob_bytes)} "
              f"({s.bytes_dedup_ratio}× the stored blob bytes)")
    if s.top_threads:
        tt = Table(title=f"top {len(s.top_threads)} threads by size")
        for col in ("thread_id", "checkpoints", "bytes", "updated"):
            tt.add_column(col, justify="left" if col in ("thread_id", "updated") else "right")
        for t in s.top_threads:
            tt.add_row(escape(t.thread_id), str(t.checkpoint_count), _size(t.bytes), _when(t.updated_at))
        out.print(tt)


# --- export / import ---------------------------------------------------------------------------------------


@app.command("export")
def export_cmd(
    to: str = typer.Option(..., "--to", help="Output directory (its checkpoints/, writes/, blobs/ are replaced)."),
    db: str = DbOption,
    thread: list[str] = typer.Option(None, "--thread", help="Only these threads (repeatable)."),
    as_json: bool = JsonOption,
) -> None:
    """Parquet export partitioned by dt=YYYY-MM-DD: checkpoints, writes, blob metadata (no values)."""
    from threadline.transfer import export as X

    with _saver(db) as saver, _progress(not as_json) as progress:
        task = progress.add_task("export", total=None)
        try:
            report = X.export_parquet(saver, to, thread_ids=thread or None, progress=_tick(progress, task))
        except (ThreadlineError, ValueError, OSError) as exc:
            _fail(str(exc))
    if as_json:
        return _emit(report.to_json())
    table = Table(title=f"exported {report.threads} thread(s) to {escape(report.out_dir)}")
    for col in ("table", "rows", "partitions"):
        table.add_column(col)
    for name, n in report.rows.items():
        table.add_row(name, str(n), ", ".join(f"dt={p}" for p in report.partitions[name]))
    out.print(table)
    out.print(f"[dim]query: duckdb -c \"SELECT node, COUNT(*), SUM(bytes) FROM read_parquet('{escape(report.out_dir)}/writes/*/*.parquet', "
              "hive_partitioning=true) GROUP BY node\"[/dim]")


@app.command("import")
def import_cmd(
    source: str = typer.Argument(..., help="Official LangGraph database: SqliteSaver file (path or sqlite:///path) or postgresql:// URL."),
    db: str = DbOption,
    thread: list[str] = typer.Option(None, "--thread", help="Only these threads (repeatable)."),
    replace: bool = typer.Option(False, "--replace", help="Replace threads that already exist in the target."),
    verify: bool = typer.Option(True, "--verify/--no-verify", help="Compare every imported thread on both sides."),
    graph: str = GraphOption,
    as_json: bool = JsonOption,
) -> None:
    """Import threads written by LangGraph's official SqliteSaver (or PostgresSaver) and verify them.

    The target must be named (--db or $THREADLINE_DB); the source is opened read-only."""
    from threadline.transfer import official as X

    if not (db or os.environ.get("THREADLINE_DB")):
        _fail("import writes into the database you name: pass --db URL (or set $THREADLINE_DB)", 2)
    try:
        X.check_source(source)
    except (ThreadlineError, ValueError, OSError) as exc:
        _fail(str(exc), 2)
    g = _graph(graph)
    with _saver(db, must_exist=False) as saver, _progress(not as_json) as progress:
        task = progress.add_task("import", total=None)
        try:
            report = X.import_langgraph(source, saver, thread_ids=thread or None, verify=verify, replace=replace, graph=g,
                                        progress=_tick(progress, task))
        except (ThreadlineError, ValueError, OSError) as exc:
            _fail(str(exc))
    if as_json:
        _emit(report.to_json())
    else:
        table = Table(title=f"imported from {escape(source)}")
        for col in ("thread_id", "checkpoints", "writes", "verified"):
            table.add_column(col)
        for t in report.threads:
            status = "-" if t.verified is None else ("[green]identical[/green]" if t.verified else f"[red]{escape('; '.join(t.mismatches[:3]))}[/red]")
            table.add_row(escape(t.thread_id), str(t.checkpoints), str(t.writes), status)
        out.print(table)
    if not report.ok:
        raise typer.Exit(1)
