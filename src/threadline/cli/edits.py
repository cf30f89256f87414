"""Commands that write new checkpoints through the application's graph: merge (a branch into
another, ``threadline.lifecycle.merge``), edit (one state update to many threads) and
create-thread (a thread from a JSON state, ``threadline.lifecycle.bulk``). merge and edit
preview unless told to apply (``--apply``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from threadline.cli import options as O
from threadline.cli.shared import command, out
from threadline.errors import ConfigError
from threadline.lazy import LazyModule

if TYPE_CHECKING:
    from threadline.lifecycle.bulk import BulkEditReport
    from threadline.lifecycle.merge import MergeResult

# loaded when a command runs (``threadline --help`` loads none of them)
F = LazyModule("threadline.cli.render.format")
bulk = LazyModule("threadline.lifecycle.bulk")
merging = LazyModule("threadline.lifecycle.merge")
names = LazyModule("threadline.read.names")


def _needs_graph(graph: Any, name: str) -> Any:
    if graph is None:
        raise ConfigError(f"{name} runs the graph's reducers: pass --graph MODULE:ATTR (or set $THREADLINE_GRAPH)")
    return graph


def _choices(items: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        channel, sep, side = item.partition("=")
        if not sep or not channel:
            raise ConfigError(f"--take expects CHANNEL=source|target, got {item!r}")
        out[channel] = side
    return out


def _merged(r: MergeResult, **_: Any) -> None:
    t = F.table(f"merge {F.short(r.source)} into {F.short(r.target)} of {r.thread_id} (fork point {F.short(r.fork_point)})",
              "channel", "source", "target", "take", "~after the merge")
    for c in r.channels:
        if not (c.changed_source or c.changed_target):
            continue
        take = "[red]conflict[/red]" if c.conflict and c.choice is None else c.choice or ""
        t.add_row(escape(c.channel), "changed" if c.changed_source else "-", "changed" if c.changed_target else "-", take,
                  escape(c.summary + ("" if c.result is None else ": " + F.value_text(c.result, 60))))
    out.print(t)
    if r.applied:
        out.print(f"[green]merged[/green]: new checkpoint {F.short(r.checkpoint_id)} on {F.short(r.target)}, metadata merge = "
                  f"{{source: {F.short(r.source)}, target: {F.short(r.target)}}}")
    elif r.unresolved:
        out.print(f"preview: conflicts on {escape(', '.join(r.unresolved))}; choose with --take CHANNEL=source|target, then --apply")
    else:
        out.print("preview: nothing written; --apply writes the merge checkpoint")


@command("merge", render=_merged, opens=lambda o: "write" if o["apply"] else "read", thread="thread")
def merge(
    saver: Any,
    thread: str = O.Thread,
    source: str = typer.Argument(..., metavar="SOURCE", show_default=False,
                                 help="The branch to bring in: its checkpoint (a CHECKPOINT as show takes it: id, short id, tag, HEAD~N …)."),
    into: str = typer.Option(..., "--into", metavar="TARGET", help="The branch to merge into: its checkpoint (e.g. HEAD)."),
    graph: str = O.Graph,
    take: list[str] = typer.Option(None, "--take", metavar="CHANNEL=source|target",
                                   help="Resolve a conflict: take that channel from the source or keep the target's."),
    apply: bool = typer.Option(False, "--apply", help="Write the merge checkpoint (default: preview only)."),
    as_node: str = typer.Option(None, "--as-node", metavar="NODE", help="Write the update as this node (default: LangGraph's rule)."),
    ns: str = O.Ns,
) -> MergeResult:
    """Bring a branch's changes onto another branch through the graph's reducers: a preview per channel
    (conflicts: changed on both sides since the fork point), then with --apply one new checkpoint naming both parents."""
    g = _needs_graph(graph, "merge")
    choose = _choices(take)
    tid = names.resolve_thread(saver, thread)
    src, dst = (names.resolve_checkpoint(saver, tid, name, checkpoint_ns=ns) for name in (source, into))
    config = lambda cid: {"configurable": {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": cid}}  # noqa: E731
    return merging.merge(saver, g, config(src), into=config(dst), choose=choose, apply=apply, as_node=as_node)


def _json_file(path: str, what: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path!r}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ConfigError(f"{what} {path!r} is not JSON: {exc}") from None


def _values(path: str | None, items: list[str] | None) -> dict[str, Any]:
    values = _json_file(path, "the state file") if path else {}
    if not isinstance(values, dict):
        raise ConfigError(f"the state file {path!r} must hold a JSON object (channel → value), got {type(values).__name__}")
    for item in items or []:
        channel, sep, text = item.partition("=")
        if not sep or not channel:
            raise ConfigError(f"--set expects CHANNEL=JSON, got {item!r}")
        try:
            values[channel] = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"--set {channel}: the value is not JSON ({exc}); quote text as JSON: '\"text\"'") from None
    if not values:
        raise ConfigError("give the state edit: --values FILE.json and/or --set CHANNEL=JSON")
    return values


def _edited(r: BulkEditReport, **_: Any) -> None:
    t = F.table(f"edit {r.mark}", "thread_id", "status", "~changes")
    for e in r.threads:
        t.add_row(escape(e.thread_id), e.status, escape("; ".join(f"{ch}: {s}" for ch, s in e.changes.items())))
    out.print(t)
    done = "edited" if r.applied else "would edit"
    out.print(f"{r.count(done)} thread(s) {done}, {r.count('already applied')} already applied, {r.count('unchanged')} unchanged"
              + ("" if r.applied else "; preview: nothing written, --apply writes"))


@command("edit", render=_edited, opens=lambda o: "write" if o["apply"] else "read")
def edit(
    saver: Any,
    thread: list[str] = typer.Argument(None, metavar="THREAD", help="Threads to edit: ids or patterns (thread-*).", show_default=False),
    where: list[str] = O.Where,
    values: str = typer.Option(None, "--values", metavar="FILE.json", help="The update: a JSON object, channel → value."),
    set_: list[str] = typer.Option(None, "--set", metavar="CHANNEL=JSON", help="One channel's update (repeatable)."),
    graph: str = O.Graph,
    apply: bool = typer.Option(False, "--apply", help="Write the new checkpoints (default: preview only)."),
    as_node: str = typer.Option(None, "--as-node", metavar="NODE", help="Write the update as this node (default: LangGraph's rule)."),
    name: str = typer.Option(None, "--name", metavar="NAME", help="The edit's mark in the metadata (default: a digest of the update)."),
    progress: Any = None,
) -> BulkEditReport:
    """Apply one state update to many threads through the graph's reducers, as new checkpoints (source update).

    Preview first; --apply writes. Rerunning an edit skips the threads it already changed, so an interrupted run resumes."""
    g = _needs_graph(graph, "edit")
    update = _values(values, set_)
    return bulk.bulk_edit(saver, g, update, threads=thread or None, metadata=O.metadata(where) or None, apply=apply, as_node=as_node,
                     mark=name, progress=progress)


@command("create-thread", opens="target", render=lambda cid, thread="", **_: out.print(
    f"[green]created[/green] thread {escape(thread)}: checkpoint {F.short(cid)}"))
def create(
    saver: Any,
    thread: str = typer.Argument(..., metavar="THREAD", help="The new thread_id.", show_default=False),
    state: str = typer.Option(..., "--state", metavar="FILE.json", help="The state: a JSON object, channel → value."),
    graph: str = O.Graph,
    as_node: str = typer.Option(None, "--as-node", metavar="NODE", help="Write the state as this node (default: LangGraph's rule)."),
) -> str:
    """Start a thread from a JSON state (for tests and fixtures), written through the graph."""
    return bulk.create_thread(saver, _needs_graph(graph, "create-thread"), thread, _values(state, None), as_node=as_node)
