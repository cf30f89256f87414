"""Renderers of the read models: threads, the checkpoint tree, state, diff, audit, latest, stats.

Checkpoints are shown by their short id (``read.names``), which every command accepts back;
long values are folded (``--full`` shows them whole, ``--json`` gives everything).
"""

from __future__ import annotations

import json

from typing import Any

from rich.markup import escape
from rich.padding import Padding
from rich.text import Text
from rich.tree import Tree

from threadline.cli.render.format import DAMAGED, VALUE_WIDTH, ago, damage_notes, page_footer, short, size, table, value_text, when
from threadline.cli.render.messages import is_message, is_message_list, message_line
from threadline.cli.shared import out
from threadline.read import is_internal_channel, jsonable
from threadline.read.names import abbreviate


def threads(page: Any, **_: Any) -> None:
    first = page.offset + 1 if page.threads else 0
    t = table(f"threads {first}–{page.offset + len(page.threads)} of {page.total}",
              "thread_id", "updated", ">checkpoints", ">size", "head", "…status", "…metadata")
    for th in page.threads:
        status = th.status.kind if th.status is not None else "[cyan]cold[/cyan]" if th.cold else DAMAGED if th.damage else ""
        meta = escape(json.dumps(th.metadata, ensure_ascii=False, default=str)[:60]) if th.metadata else ""
        t.add_row(escape(th.thread_id) + _official(th) + (" [dim](archived)[/dim]" if th.archived else ""),
                  ago(th.updated_at), str(th.checkpoint_count), size(th.bytes), short(th.head_checkpoint_id), status, meta)
    out.print(t)
    if any(not th.adopted for th in page.threads):
        out.print("[yellow](official)[/yellow] in the official LangGraph saver's tables, not adopted yet: shown as they "
                  "are there; threadline's saver adopts a thread when a program first uses it (`threadline import` "
                  "copies them to another database). Reading never adopts.", soft_wrap=True)
    if any(th.cold for th in page.threads):
        out.print("[cyan]cold[/cyan]: moved whole to the object store (counts as they were then); read from its archive, nothing "
                  "restored; a program's first use restores it, or `threadline tier --restore THREAD`.", soft_wrap=True)
    for line in damage_notes(page.threads):
        out.print(line, soft_wrap=True)
    if page.next_offset is not None:
        out.print(f"[dim]more: --offset {page.next_offset}[/dim]")


def _official(th: Any) -> str:
    """The mark of a thread the official saver's tables hold checkpoints of that threadline has not adopted."""
    if th.official_only:
        return " [yellow](official)[/yellow]"
    return f" [yellow](+{th.unadopted} official)[/yellow]" if th.unadopted else ""


def _label(n: Any, ids: dict[str, str], clock: Any) -> Text:
    """One checkpoint on one line, never wrapped: its id and marks first (as git's ``--oneline``
    puts refs after the hash), then step, source, time, pending writes and last the nodes
    that made it; on a narrow terminal the end of the line is cut with ``…``."""
    marks = []
    if n.is_head:
        marks.append("[bold green]HEAD[/bold green]")
    if n.is_fork_point:
        marks.append(f"[yellow]fork: {len(n.children)} branches[/yellow]")
    if n.interrupted:
        marks.append("[magenta]interrupted[/magenta]")
    if n.concurrent_with:
        marks.append(f"[red]concurrent run: overlaps {ids.get(n.concurrent_with) or short(n.concurrent_with)}[/red]")
    marks += [f"[bold cyan]tag: {escape(t)}[/bold cyan]" for t in n.tags]
    if merged := n.merged:
        marks.append(f"[cyan]merge of {ids.get(merged['source']) or short(merged['source'])} into "
                     f"{ids.get(merged['target']) or short(merged['target'])}[/cyan]")
    op = n.metadata.get("threadline_op")
    if op:
        src = (n.metadata.get("forked_from") or {}).get("checkpoint_id")
        marks.append(f"[cyan]{op} of {ids.get(src) or short(src)}[/cyan]")
    writes = f"  {n.pending_writes} write{'s' if n.pending_writes != 1 else ''}" if n.pending_writes else ""
    dim = not (n.on_head_path or n.checkpoint_ns)
    rest = f"step {n.step}  {n.source or '?'}  {clock(n.created_at)}{writes}  by {escape(','.join(n.writers) or '-')}"
    text = Text.from_markup(ids[n.checkpoint_id] + (" (" + ", ".join(marks) + ")" if marks else "") + "  "
                            + (f"[dim]{rest}[/dim]" if dim else rest))
    text.no_wrap, text.overflow = True, "ellipsis"
    return text


def _clock(created: list[float | None]) -> tuple[str, Any]:
    """The day every checkpoint shown was made on (for the header; "" when they span days) and
    how a row shows its time: ``HH:MM:SS`` within that day, else ``MM-DD HH:MM``."""
    days = {when(ts)[:10] for ts in created if ts is not None}
    if len(days) == 1:
        return f", {days.pop()} UTC", lambda ts: when(ts)[11:]
    return "", lambda ts: when(ts)[5:16]


def channel_history(h: Any, full: bool = False, **_: Any) -> None:
    """One channel through time (``history --channel``): a row per version, oldest first."""
    branch = "every branch" if h.all_branches else "the head branch"
    t = table(f"{h.channel} in {h.thread_id} ({len(h.versions)} versions along {branch})",
              "checkpoint", ">step", "when", "by", ">size", "~change", "~value")
    ids = abbreviate([v.checkpoint_id for v in h.versions])
    width = None if full else 60
    for v in h.versions:
        mark = "" if v.on_head_branch else " (off head)"
        t.add_row(ids[v.checkpoint_id] + mark, str(v.step), when(v.created_at), escape(",".join(v.writers)), size(v.bytes),
                  escape(v.summary), escape(_version_text(jsonable(v.value), width)) if v.present else "-")
    out.print(t)


def _version_text(value: Any, width: int | None) -> str:
    """A channel's value in one cell: a list as its length and last item (a message as ``role: content``)."""
    if isinstance(value, list) and value:
        last = message_line(value[-1], width=width) if is_message(value[-1]) else value_text(value[-1], width)
        return f"[{len(value)}] … {last}" if len(value) > 1 else f"[1] {last}"
    return value_text(value, width)


def history(h: Any, subgraphs: bool = False, ns: str = "", limit: int = 100, offset: int = 0, **_: Any) -> None:
    if hasattr(h, "channel"):
        return channel_history(h, **_)
    root_ns = "" if subgraphs else ns
    ids = abbreviate([cid for space in h.nodes.values() for cid in space])
    newest = sorted(h.nodes.get(root_ns, {}), reverse=True)
    kept = set(newest[offset:offset + limit])
    day, clock = _clock([n.created_at for space in h.nodes.values() for n in space.values()])
    forks = len(h.fork_points)
    pinned = "  [bold cyan]pinned[/bold cyan]" if h.pinned is not None else ""
    tree = Tree(f"[bold]{escape(h.thread_id)}[/bold]{pinned}  head {ids.get(h.head, '-')}  ({len(newest)} checkpoints, "
                f"{forks} fork point{'' if forks == 1 else 's'}{day})")

    def shown(space: str, cid: str) -> bool:
        return space != root_ns or cid in kept

    def add(parent: Tree, space: str, cid: str) -> None:
        # a linear run of checkpoints is listed at one level; each branch of a fork point nests
        cur: str | None = cid
        while cur is not None:
            n = h.nodes[space][cur]
            item = parent.add(_label(n, ids, clock))
            for sub in n.subgraphs:
                st = item.add(f"[blue]subgraph {escape(sub)}[/blue]")
                for r in h.roots.get(sub, []):
                    add(st, sub, r)
            children = [c for c in n.children if shown(space, c)]
            if len(children) == 1:
                cur = children[0]
            else:
                for i, child in enumerate(children, 1):
                    add(item.add(f"[yellow]branch {i}[/yellow]"), space, child)
                cur = None

    nodes = h.nodes.get(root_ns, {})
    for cid in sorted(kept):
        if nodes[cid].parent_checkpoint_id not in kept:  # a root, or the oldest shown of its branch
            add(tree, root_ns, cid)
    out.print(tree)
    for f in h.concurrent_forks:
        out.print(f"[red]concurrent fork at {ids.get(f.fork_point) or short(f.fork_point)}:[/red] "
                  f"{escape(f.describe(h.head_path(f.checkpoint_ns)))}")
    if footer := page_footer(len(kept), offset, len(newest), "checkpoints (newest first)"):
        out.print(footer)


def _line(text: str, indent: int) -> None:
    """One line of text; when it wraps, its continuation keeps the indentation."""
    out.print(Padding(Text(text), (0, 0, 0, indent), expand=False))


def _value(label: str, value: Any, width: int | None, indent: int = 2) -> None:
    """A channel value: a message list one message per line, anything else as folded JSON."""
    data = jsonable(value)
    if is_message_list(data) and len(data) > 1:
        _line(f"{label} ({len(data)} messages)", indent)
        for m in data:
            _line(message_line(m, width=width), indent + 2)
    elif is_message_list(data) or is_message(data):
        _line(f"{label}: {message_line(data[0] if isinstance(data, list) else data, width=width)}", indent)
    else:
        _line(f"{label}: {value_text(data, width)}", indent)


def state(view: Any, internal: bool = False, full: bool = False, **_: Any) -> None:
    width = None if full else VALUE_WIDTH
    head = "  [bold green]HEAD[/bold green]" if view.is_head else ""
    out.print(f"[bold]{escape(view.thread_id)}[/bold] @ {short(view.checkpoint_id)}{head}  step {view.step}  "
              f"{view.source}  {when(view.created_at)}")
    out.print(f"[dim]checkpoint_id {view.checkpoint_id}  parent {short(view.parent_checkpoint_id)}[/dim]")
    out.print("[bold]values[/bold]" + (" (pending writes applied)" if view.pending_applied else ""))
    shown = {**view.values, **(view.internal if internal else {})}
    for ch in sorted(shown):
        _value(ch, shown[ch], width)
    out.print(f"[bold]next[/bold]: {', '.join(view.next) or '(none)'}")
    writes = [w for w in view.pending_writes if internal or not is_internal_channel(w.channel)]
    if view.pending_writes:
        hidden = len(view.pending_writes) - len(writes)
        out.print(f"[bold]pending writes[/bold] ({len(view.pending_writes)}"
                  + (f"; {hidden} bookkeeping, shown with --internal)" if hidden else ")"))
        for w in writes:
            _value(f"{w.node or '?'} → {w.channel}", w.value, width)
        if not view.pending_applied and view.is_head:
            out.print("[dim]pending writes are not folded into values without the graph's reducers: pass --graph MODULE:ATTR[/dim]")
    for i in view.interrupts:
        by = f" in {i['node']}" if i.get("node") else ""
        out.print(f"[magenta]interrupt{escape(by)}[/magenta]: {escape(value_text(i.get('value'), width))}")
    for i in view.answered:
        by = f" in {i['node']}" if i.get("node") else ""
        out.print(f"[green]answered interrupt{escape(by)}[/green]: {escape(value_text(i.get('value'), width))} "
                  f"→ answer {escape(value_text(i.get('answer'), width))}")


def _message_changes(node: Tree, m: dict[str, Any], width: int | None) -> None:
    for msg in m["added"]:
        node.add(f"[green]+ {escape(message_line(msg, width=width))}[/green]")
    for e in m["edited"]:
        node.add(f"[yellow]~ {escape(message_line(e['before'], width=width))}\n  → {escape(message_line(e['after'], width=width))}[/yellow]")
    for msg in m["removed"]:
        node.add(f"[red]- {escape(message_line(msg, width=width))}[/red]")


def _key_changes(node: Tree, k: dict[str, Any], width: int | None) -> None:
    for key, v in k["added"].items():
        node.add(f"[green]+ {escape(key)} = {escape(value_text(v, width))}[/green]")
    for key, v in k["changed"].items():
        node.add(f"[yellow]~ {escape(key)}: {escape(value_text(v['before'], width))} → {escape(value_text(v['after'], width))}[/yellow]")
    for key, v in k["removed"].items():
        node.add(f"[red]- {escape(key)} = {escape(value_text(v, width))}[/red]")


def diff(d: Any, full: bool = False, **_: Any) -> None:
    width = None if full else VALUE_WIDTH
    out.print(f"[bold]{escape(d.thread_id)}[/bold]  {short(d.a)} → {short(d.b)}")
    if not d.channels:
        out.print("no differences" + (f" (unchanged: {', '.join(d.unchanged)})" if d.unchanged else ""))
        return
    tree = Tree("channels")
    for ch, change in d.channels.items():
        colour = {"added": "green", "removed": "red", "changed": "yellow"}[change["kind"]]
        node = tree.add(f"[{colour}]{change['kind']}[/{colour}] {escape(ch)}")
        if "messages" in change:
            _message_changes(node, change["messages"], width)
        elif "keys" in change:
            _key_changes(node, change["keys"], width)
        else:
            if "before" in change:
                node.add(f"[red]- {escape(value_text(change['before'], width))}[/red]")
            if "after" in change:
                node.add(f"[green]+ {escape(value_text(change['after'], width))}[/green]")
    out.print(tree)
    if d.unchanged:
        out.print(f"[dim]unchanged (same blob): {', '.join(d.unchanged)}[/dim]")


def audit(result: dict[str, Any], thread: str | None = None, all_ns: bool = False, offset: int = 0, since: Any = None,
          **_: Any) -> None:
    writes, stats = result["writes"], result["stats"]
    if thread and not writes:
        out.print(f"no writes of {escape(thread)}" + (f" @ {short(stats.scope['checkpoint_id'])}" if stats.scope.get("checkpoint_id") else "")
                  + (f" from offset {offset}" if offset else ""))
    elif thread:
        ids = abbreviate(w.checkpoint_id for w in writes)
        day = when(writes[0].created_at)[:10]
        t = table(f"writes of {thread}" + (f" @ {short(stats.scope['checkpoint_id'])}" if stats.scope.get("checkpoint_id") else "")
                  + f" from {day} (UTC)", *(["…ns"] if all_ns else []), "checkpoint", "…node", "task", ">idx", "…channel", ">bytes",
                  "time")
        for w in writes:
            row = [ids[w.checkpoint_id], escape(w.node or "?"), w.task_id[:6], str(w.idx), escape(w.channel), str(w.bytes),
                   when(w.created_at)[11:]]
            t.add_row(*([escape(w.checkpoint_ns or "-")] if all_ns else []), *row)
        out.print(t)
        if since is None and (footer := page_footer(len(writes), offset, stats.writes, "writes")):
            out.print(footer)
    st = table("per node" + (f" — {thread}" if thread else " — whole database"), "node", ">writes", ">tasks", ">bytes", ">avg")
    for n in stats.tasks:
        st.add_row(escape(n.node), str(n.writes), str(n.tasks), size(n.total_bytes), f"{n.avg_bytes:.0f}")
    out.print(st)
    line = f"writes {stats.writes} rows / {size(stats.writes_bytes)}  vs  blobs {stats.blobs} rows / {size(stats.blobs_bytes)}"
    if stats.new_blobs_bytes is not None:
        line += f"  (new at this checkpoint: {size(stats.new_blobs_bytes)})"
    out.print(line)


def _latest_text(value: Any, width: int | None) -> str:
    data = jsonable(value)
    if is_message_list(data):
        return f"({len(data)} messages) last {message_line(data[-1], width=width)}"
    return message_line(data, width=width) if is_message(data) else value_text(data, width)


def latest(rows: list[Any], channel: str = "", full: bool = False, limit: int = 50, offset: int = 0, **_: Any) -> None:
    if full:
        for r in rows:
            out.print(f"[bold]{escape(r.thread_id)}[/bold] @ {short(r.checkpoint_id)}")
            if r.present:
                _value(channel, r.value, None)
            else:
                out.print("  (no value)")
    else:
        t = table(f"latest {channel}", "thread_id", "head", "~value")
        for r in rows:
            t.add_row(escape(r.thread_id), short(r.checkpoint_id),
                      escape(_latest_text(r.value, VALUE_WIDTH)) if r.present else "[dim](no value)[/dim]")
        out.print(t)
    if len(rows) == limit:
        out.print(f"[dim]more: --offset {offset + limit}[/dim]")


def stats(s: Any, **_: Any) -> None:
    t = table("tables", "table", ">rows", ">bytes")
    for name, row in s.tables.items():
        t.add_row(name, str(row["rows"]), size(row["bytes"]))
    t.add_row("threads", str(s.threads), "")
    for name, rows in s.others.items():
        t.add_row(name.replace("_", " "), str(rows), "")
    out.print(t)
    if s.offloaded:
        o = s.offloaded
        out.print(f"values: {size(o['in_row_bytes'])} in rows; {size(o['payload_bytes'])} offloaded to {o['store']} "
                  f"({o['rows']} rows name {o['objects']} objects); {o['cold_threads']} cold thread(s) "
                  f"({size(o['cold_bytes'])} of rows) in archives there")
    out.print(f"checkpoints reference {s.references} (channel, version) pairs stored as {s.tables['blobs']['rows']} blob rows: "
              f"dedup ratio {s.dedup_ratio}×; a full copy per checkpoint would store {size(s.logical_blob_bytes)} "
              f"({s.bytes_dedup_ratio}× the stored blob bytes)")
    if s.avg_checkpoint_bytes is not None:
        out.print(f"{size(int(s.avg_checkpoint_bytes))} stored per checkpoint on average; last 24 h: "
                  f"{sum(h['checkpoints'] for h in s.checkpoints_per_hour)} checkpoints "
                  f"(busiest hour {max(h['checkpoints'] for h in s.checkpoints_per_hour)})")
        hist = table("checkpoints by state size", ">state size", ">checkpoints")
        for b in s.state_size_histogram:
            hist.add_row(f"{size(b['min_bytes'])} – {size(b['max_bytes']) if b['max_bytes'] else '…'}", str(b["checkpoints"]))
        out.print(hist)
    if s.top_threads:
        tt = table(f"top {len(s.top_threads)} threads by size", "thread_id", ">checkpoints", ">size", "updated")
        for th in s.top_threads:
            tt.add_row(escape(th.thread_id) + (f" {DAMAGED}" if th.damage else ""), str(th.checkpoint_count), size(th.bytes), ago(th.updated_at))
        out.print(tt)
    for line in damage_notes(s.top_threads):
        out.print(line, soft_wrap=True)
