"""Commands that write new checkpoints through the application's graph: merge (a branch into
another, ``threadline.lifecycle.merge``). They preview unless told to apply (``--apply``)."""

from __future__ import annotations

from typing import Any

import typer
from rich.markup import escape

from threadline.cli import options as O
from threadline.cli.render.format import short, table, value_text
from threadline.cli.shared import command, out
from threadline.errors import ConfigError
from threadline.lifecycle.merge import MergeResult, merge as merge_branches
from threadline.read import names


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
    t = table(f"merge {short(r.source)} into {short(r.target)} of {r.thread_id} (fork point {short(r.fork_point)})",
              "channel", "source", "target", "take", "~after the merge")
    for c in r.channels:
        if not (c.changed_source or c.changed_target):
            continue
        take = "[red]conflict[/red]" if c.conflict and c.choice is None else c.choice or ""
        t.add_row(escape(c.channel), "changed" if c.changed_source else "-", "changed" if c.changed_target else "-", take,
                  escape(c.summary + ("" if c.result is None else ": " + value_text(c.result, 60))))
    out.print(t)
    if r.applied:
        out.print(f"[green]merged[/green]: new checkpoint {short(r.checkpoint_id)} on {short(r.target)}, metadata merge = "
                  f"{{source: {short(r.source)}, target: {short(r.target)}}}")
    elif r.unresolved:
        out.print(f"preview: conflicts on {escape(', '.join(r.unresolved))}; choose with --take CHANNEL=source|target, then --apply")
    else:
        out.print("preview: nothing written; --apply writes the merge checkpoint")


@command("merge", render=_merged, opens=lambda o: "write" if o["apply"] else "read", thread="thread")
def merge(
    saver: Any,
    thread: str = O.Thread,
    source: str = O.checkpoint(help="The branch to bring in: its checkpoint (" + O.CHECKPOINT_HELP + ")"),
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
    return merge_branches(saver, g, config(src), into=config(dst), choose=choose, apply=apply, as_node=as_node)
