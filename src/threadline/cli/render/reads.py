"""Renderers of the read models: threads, the checkpoint tree, state, diff, audit, latest, stats."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from threadline.cli.render.format import brief, short, size, when
from threadline.cli.shared import out


def threads(page: Any, **_: Any) -> None:
    table = Table(title=f"threads {page.offset + 1 if page.threads else 0}–{page.offset + len(page.threads)} of {page.total}")
    for col in ("thread_id", "created", "updated", "checkpoints", "bytes", "head step", "head checkpoint"):
        table.add_column(col, justify="right" if col in ("checkpoints", "bytes", "head step") else "left", overflow="fold")
    for t in page.threads:
        table.add_row(
            escape(t.thread_id), when(t.created_at), when(t.updated_at), str(t.checkpoint_count), size(t.bytes),
            "-" if t.head_step is None else str(t.head_step), short(t.head_checkpoint_id),
        )
    out.print(table)
    if page.next_offset is not None:
        out.print(f"[dim]more: --offset {page.next_offset}[/dim]")


def _node_label(n: Any) -> str:
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
            f"{when(n.created_at)}  writes {n.pending_writes}{end} " + " ".join(marks))


def history(h: Any, subgraphs: bool = False, ns: str = "", **_: Any) -> None:
    root_ns = "" if subgraphs else ns
    tree = Tree(f"[bold]{escape(h.thread_id)}[/bold]  head {h.head}  ({len(h.nodes.get(root_ns, {}))} checkpoints, "
                f"{len(h.fork_points)} fork point(s))")

    def add(parent: Tree, space: str, cid: str) -> None:
        # a linear run of checkpoints is listed at one level; each branch of a fork point nests
        cur: str | None = cid
        while cur is not None:
            n = h.nodes[space][cur]
            item = parent.add(_node_label(n))
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


def state(view: Any, internal: bool = False, **_: Any) -> None:
    head = " [bold green]HEAD[/bold green]" if view.is_head else ""
    out.print(f"[bold]{escape(view.thread_id)}[/bold] @ {view.checkpoint_id}{head}  step {view.step}  {view.source}  "
              f"{when(view.created_at)}  parent {short(view.parent_checkpoint_id)}")
    table = Table(title="values" + (" (pending writes applied)" if view.pending_applied else ""), show_lines=False)
    table.add_column("channel")
    table.add_column("version")
    table.add_column("value", overflow="fold")
    shown = {**view.values, **(view.internal if internal else {})}
    for ch in sorted(shown):
        table.add_row(escape(ch), str(view.channel_versions.get(ch, "-")), escape(brief(shown[ch], 400)))
    out.print(table)
    out.print(f"next: {', '.join(view.next) or '(none)'}")
    if view.pending_writes:
        pw = Table(title="pending writes")
        for col in ("node", "task_id", "idx", "channel", "value"):
            pw.add_column(col)
        for w in view.pending_writes:
            pw.add_row(escape(w.node or "?"), w.task_id, str(w.idx), escape(w.channel), escape(brief(w.value, 80)))
        out.print(pw)
        if not view.pending_applied and view.is_head:
            out.print("[dim]pending writes are not folded into values without the graph's reducers: pass --graph module:attr[/dim]")
    for i in view.interrupts:
        out.print(f"[magenta]interrupt[/magenta] {i.get('id')}: {escape(brief(i.get('value'), 200))}")


def _message_changes(node: Tree, m: dict[str, Any]) -> None:
    for msg in m["added"]:
        node.add(f"[green]+ message {escape(str(msg.get('id')))}[/green] {escape(brief(msg.get('content'), 100))}")
    for e in m["edited"]:
        node.add(f"[yellow]~ message {escape(str(e['id']))}[/yellow] {escape(brief(e['before'].get('content'), 50))} → "
                 f"{escape(brief(e['after'].get('content'), 50))}")
    for msg in m["removed"]:
        node.add(f"[red]- message {escape(str(msg.get('id')))}[/red] {escape(brief(msg.get('content'), 100))}")


def _key_changes(node: Tree, k: dict[str, Any]) -> None:
    for key, v in k["added"].items():
        node.add(f"[green]+ {escape(key)}[/green] = {escape(brief(v, 100))}")
    for key, v in k["changed"].items():
        node.add(f"[yellow]~ {escape(key)}[/yellow] {escape(brief(v['before'], 50))} → {escape(brief(v['after'], 50))}")
    for key, v in k["removed"].items():
        node.add(f"[red]- {escape(key)}[/red] = {escape(brief(v, 100))}")


def diff(d: Any, **_: Any) -> None:
    out.print(f"[bold]{escape(d.thread_id)}[/bold]  {d.a} → {d.b}")
    if not d.channels:
        out.print("no differences" + (f" (unchanged: {', '.join(d.unchanged)})" if d.unchanged else ""))
        return
    tree = Tree("channels")
    for ch, change in d.channels.items():
        colour = {"added": "green", "removed": "red", "changed": "yellow"}[change["kind"]]
        node = tree.add(f"[{colour}]{change['kind']}[/{colour}] {escape(ch)}")
        if "messages" in change:
            _message_changes(node, change["messages"])
        elif "keys" in change:
            _key_changes(node, change["keys"])
        else:
            if "before" in change:
                node.add(f"[red]- {escape(brief(change['before'], 120))}[/red]")
            if "after" in change:
                node.add(f"[green]+ {escape(brief(change['after'], 120))}[/green]")
    out.print(tree)
    if d.unchanged:
        out.print(f"[dim]unchanged (same blob): {', '.join(d.unchanged)}[/dim]")


def audit(result: dict[str, Any], thread: str | None = None, checkpoint: str | None = None, all_ns: bool = False,
          **_: Any) -> None:
    writes, stats = result["writes"], result["stats"]
    if thread:
        table = Table(title=f"writes of {thread}" + (f" @ {checkpoint}" if checkpoint else ""))
        cols = ["checkpoint", "node", "task_id", "idx", "channel", "task_path", "bytes", "time"]
        if all_ns:
            cols.insert(0, "ns")
        for col in cols:
            table.add_column(col, justify="right" if col in ("idx", "bytes") else "left", overflow="fold")
        for w in writes:
            row = [w.checkpoint_id, escape(w.node or "?"), w.task_id, str(w.idx), escape(w.channel), escape(w.task_path),
                   str(w.bytes), when(w.created_at)]
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
    line = f"writes {stats.writes} rows / {size(stats.writes_bytes)}  vs  blobs {stats.blobs} rows / {size(stats.blobs_bytes)}"
    if stats.new_blobs_bytes is not None:
        line += f"  (new at this checkpoint: {size(stats.new_blobs_bytes)})"
    out.print(line)


def latest(rows: list[Any], channel: str = "", **_: Any) -> None:
    table = Table(title=f"latest {channel}")
    for col in ("thread_id", "head checkpoint", "version", "value"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(escape(r.thread_id), r.checkpoint_id, str(r.version or "-"),
                      escape(brief(r.value, 200)) if r.present else "[dim](no value)[/dim]")
    out.print(table)


def stats(s: Any, **_: Any) -> None:
    table = Table(title="tables")
    for col in ("table", "rows", "bytes"):
        table.add_column(col, justify="left" if col == "table" else "right")
    for name, t in s.tables.items():
        table.add_row(name, str(t["rows"]), size(t["bytes"]))
    table.add_row("threads", str(s.threads), "")
    out.print(table)
    out.print(f"checkpoints reference {s.references} (channel, version) pairs stored as {s.tables['blobs']['rows']} blob rows: "
              f"dedup ratio {s.dedup_ratio}×; a full copy per checkpoint would store {size(s.logical_blob_bytes)} "
              f"({s.bytes_dedup_ratio}× the stored blob bytes)")
    if s.avg_checkpoint_bytes is not None:
        out.print(f"{size(int(s.avg_checkpoint_bytes))} stored per checkpoint on average; last 24 h: "
                  f"{sum(h['checkpoints'] for h in s.checkpoints_per_hour)} checkpoints "
                  f"(busiest hour {max(h['checkpoints'] for h in s.checkpoints_per_hour)})")
        hist = Table(title="checkpoints by state size")
        for col in ("state size", "checkpoints"):
            hist.add_column(col, justify="right")
        for b in s.state_size_histogram:
            hist.add_row(f"{size(b['min_bytes'])} – {size(b['max_bytes']) if b['max_bytes'] else '…'}", str(b["checkpoints"]))
        out.print(hist)
    if s.top_threads:
        tt = Table(title=f"top {len(s.top_threads)} threads by size")
        for col in ("thread_id", "checkpoints", "bytes", "updated"):
            tt.add_column(col, justify="left" if col in ("thread_id", "updated") else "right")
        for t in s.top_threads:
            tt.add_row(escape(t.thread_id), str(t.checkpoint_count), size(t.bytes), when(t.updated_at))
        out.print(tt)
