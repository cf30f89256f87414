"""Humans in the loop: ``inbox`` (every interrupt waiting for an answer), ``resume`` (answer one
and run on) and ``replay`` (run again from a past checkpoint: a fork), over ``threadline.read.inbox``
and ``threadline.runs``. Runs use the app's graph (``--graph MODULE:FACTORY``) on ``--db``, through
the thread guard. Exit codes: 0 done; 1 the run failed, or the inbox lists a thread that cannot be
read; 2 bad input (invalid JSON, a thread not waiting, no or a broken --graph)."""

from __future__ import annotations

from typing import Any

import typer

from threadline.cli import options as O
from threadline.cli.shared import command
from threadline.lazy import LazyModule

# loaded when a command runs (``threadline --help`` loads none of them)
read = LazyModule("threadline.read")
runs = LazyModule("threadline.runs")
names = LazyModule("threadline.read.names")


def _value(text: str | None) -> str | None:
    if text is not None:
        try:
            runs.parse_value(text)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
    return text


@command("inbox", render="runs.inbox", problems=lambda items: any(i.damage is not None for i in items), lean=True)
def inbox(saver: Any, limit: int = O.limit(50, "threads"), offset: int = O.Offset) -> list[read.InboxItem]:
    """Every thread waiting on interrupt(), oldest first: the payload, the node, how long it has waited, the thread's metadata.

    A thread that cannot be read is listed as damaged, with the command that explains it; exit 1 then."""
    return read.inbox(saver, limit=limit, offset=offset)


@command("resume", render="runs.run", opens="write")
def resume(
    saver: Any,
    thread: str = O.Thread,
    value: str = typer.Option(..., "--value", metavar="JSON", callback=_value, help="The answer, as JSON (e.g. '{\"approved\": true}')."),
    graph: str = O.Graph,
    interrupt: str = typer.Option(None, "--interrupt", metavar="ID", help="The interrupt to answer, when the thread waits on several."),
    stream: Any = None,
) -> runs.RunResult:
    """Answer the interrupt THREAD waits on with --value and run the graph on (Command(resume=…)), printing each update as it streams."""
    return runs.resume(graph, saver, thread, runs.parse_value(value), interrupt_id=interrupt, on_event=stream)


@command("replay", render="runs.run", opens="write")
def replay(saver: Any, thread: str = O.Thread, checkpoint: str = O.checkpoint(), graph: str = O.Graph, stream: Any = None) -> runs.RunResult:
    """Run the graph again from a past CHECKPOINT of THREAD (time travel): the new checkpoints fork a branch from it."""
    if graph is None:
        raise runs.needs_graph("replay")
    return runs.replay(graph, saver, thread, names.resolve_checkpoint(saver, thread, checkpoint), on_event=stream)
