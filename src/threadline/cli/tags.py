"""Tags and pins: tag, untag, tags, pin, unpin — each one call into ``threadline.lifecycle.tags``.
Listing reads; the others change the database named by --db or $THREADLINE_DB."""

from __future__ import annotations

from typing import Any

import typer
from rich.markup import escape

from threadline.cli import options as O
from threadline.cli.shared import command, out
from threadline.lazy import LazyModule

# loaded when a command runs (``threadline --help`` loads none of them)
F = LazyModule("threadline.cli.render.format")
T = LazyModule("threadline.lifecycle.tags")
common = LazyModule("threadline.read.common")


def _listed(r: T.TagListing, **_: Any) -> None:
    if not r.tags and not r.pins:
        out.print("no tags and no pinned threads")
        return
    if r.tags:
        t = F.table("tags", "thread_id", "tag", "checkpoint", "ns", "created")
        for tag in r.tags:
            t.add_row(escape(tag.thread_id), escape(tag.name), F.short(tag.checkpoint_id), escape(tag.checkpoint_ns), common.iso(tag.created_at) or "")
        out.print(t)
    for tid, pinned in r.pins:
        out.print(f"pinned: {escape(tid)} (since {common.iso(pinned)})")


@command("tag", opens="write", render=lambda r, **_: out.print(
    f"[green]tagged[/green] {F.short(r.checkpoint_id)} of {escape(r.thread_id)} as {escape(r.name)}"))
def tag(saver: Any, thread: str = O.Thread, checkpoint: str = O.checkpoint(),
        name: str = typer.Argument(..., metavar="NAME", help="The tag (a letter or _ then letters, digits, _ . -).", show_default=False),
        ns: str = O.Ns) -> Any:
    """Name a checkpoint. Retention, TTL expiry, the sweeper and delete keep a tagged checkpoint (unless --force)."""
    return T.tag(saver, thread, checkpoint, name, checkpoint_ns=ns)


@command("untag", opens="write", render=lambda r, **_: out.print(
    f"removed tag {escape(r.name)} ({F.short(r.checkpoint_id)}) of {escape(r.thread_id)}"))
def untag(saver: Any, thread: str = O.Thread,
          name: str = typer.Argument(..., metavar="NAME", help="The tag to remove.", show_default=False)) -> Any:
    """Remove a tag (the checkpoint stays)."""
    return T.untag(saver, thread, name)


@command("tags", render=_listed)
def tags(saver: Any, thread: str = typer.Argument(None, metavar="THREAD", help="Only this thread (default: all).", show_default=False)) -> Any:
    """List tags and pinned threads."""
    return T.listing(saver, thread)


@command("pin", opens="write", render=lambda r, thread="", **_: out.print(f"[green]pinned[/green] {escape(thread)} (since {common.iso(r)})"))
def pin(saver: Any, thread: str = O.Thread) -> float:
    """Pin a thread: retention, TTL expiry, the sweeper and delete keep all of it (unless --force)."""
    return T.pin(saver, thread)


@command("unpin", opens="write", render=lambda r, thread="", **_: out.print(f"unpinned {escape(thread)}"))
def unpin(saver: Any, thread: str = O.Thread) -> None:
    """Unpin a thread."""
    T.unpin(saver, thread)
