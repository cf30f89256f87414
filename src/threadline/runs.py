"""Runs a person starts: answer an interrupt, replay from a past checkpoint, edit state and run.

Each is a normal LangGraph run of the app's own graph on the saver given (its compiled
checkpointer replaced by that saver; its store kept), through the thread guard
(``threadline.guard.guarded``: a second run on the same thread is refused), streamed with
``stream_mode="updates"`` so every node's update reaches ``on_event`` as it happens::

    from threadline import runs

    result = runs.resume(graph, saver, "t-1", {"approved": True}, on_event=print)
    result = runs.replay(graph, saver, "t-1", checkpoint_id)          # a fork, as time travel is
    result = runs.edit_and_run(graph, saver, "t-1", checkpoint_id, {"messages": [...]})

The CLI (``threadline resume``, ``replay``) and the browser (``threadline ui --graph``) call these.
Errors: ``ConfigError`` for a thread that is not waiting, an unknown interrupt id or an update
LangGraph refuses; ``NotFoundError`` for an unknown checkpoint; ``ThreadBusyError`` when a run
holds the thread; a node's own exception propagates (LangGraph stores it on the thread).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from threadline.errors import ConfigError, NotFoundError
from threadline.guard import guarded
from threadline.read.common import bind_graph, head_op, jsonable
from threadline.read.status import ThreadStatus, thread_status

OnEvent = Callable[["RunEvent"], None]


@dataclass
class RunEvent:
    """One step of a run as it streams: ``node`` and its ``update`` (JSON-able), or the
    interrupts it stopped at (``node`` ``"__interrupt__"``)."""

    node: str
    update: Any

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "update": self.update}


@dataclass
class RunResult:
    """What a run did: its ``events`` in order, the thread's ``status`` after it and the
    checkpoint it ``started_from`` (None: the head)."""

    thread_id: str
    action: str
    started_from: str | None
    events: list[RunEvent] = field(default_factory=list)
    status: ThreadStatus | None = None

    def to_json(self) -> dict[str, Any]:
        return {"thread_id": self.thread_id, "action": self.action, "started_from": self.started_from,
                "events": [e.to_json() for e in self.events], "status": self.status.to_json() if self.status else None}


def needs_graph(what: str, flag: str = "--graph MODULE:FACTORY") -> ConfigError:
    """The one line an action that needs the app's graph answers without it."""
    return ConfigError(f"{what} runs your agent's graph: give it as {flag} (or set $THREADLINE_GRAPH)")


def bound(graph: Any, saver: Any) -> Any:
    """The app's graph (compiled, or a ``StateGraph`` builder) running on ``saver``, through the thread guard."""
    if graph is None:
        raise needs_graph("this action")
    if hasattr(graph, "compile") and not hasattr(graph, "get_state"):
        graph = graph.compile(checkpointer=saver)
    return guarded(bind_graph(graph, saver), saver)


def parse_value(text: str) -> Any:
    """A resume value given as JSON text; ConfigError naming the problem."""
    import json

    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"the value is not valid JSON ({exc}); e.g. --value '{{\"approved\": true}}'") from None


def _config(thread_id: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def run(graph: Any, saver: Any, inputs: Any, config: dict[str, Any], *, action: str = "run",
        on_event: OnEvent | None = None) -> RunResult:
    """Stream one run of ``graph`` on ``saver`` (through the guard) from ``inputs`` with ``config``;
    each node's update goes to ``on_event`` as it comes and into the result."""
    app = bound(graph, saver)
    tid = config["configurable"]["thread_id"]
    result = RunResult(tid, action, config["configurable"].get("checkpoint_id"))
    for chunk in app.stream(inputs, config, stream_mode="updates"):
        for node, update in (chunk or {}).items():
            event = RunEvent(node, jsonable(update))
            result.events.append(event)
            if on_event is not None:
                on_event(event)
    result.status = thread_status(saver, tid)
    return result


def resume(graph: Any, saver: Any, thread_id: str, value: Any, *, interrupt_id: str | None = None,
           on_event: OnEvent | None = None) -> RunResult:
    """Answer the interrupt ``thread_id`` waits on with ``value`` (``Command(resume=value)``) and run on.

    ``interrupt_id`` picks one interrupt when the thread waits on several (required then).
    ConfigError when the thread is not waiting on an interrupt or the id is not one it waits on."""
    from langgraph.types import Command

    if graph is None:
        raise needs_graph("resume")
    status = thread_status(saver, thread_id, busy=lambda _: False)  # a run holding it: the guard refuses, naming it
    if status.kind != "interrupted":
        raise ConfigError(f"thread {thread_id!r} is not waiting on an interrupt (its status is {status.kind}): nothing to answer")
    ids = [i.get("id") for i in status.interrupts]
    if interrupt_id is not None:
        if interrupt_id not in ids:
            raise ConfigError(f"thread {thread_id!r} does not wait on interrupt {interrupt_id!r}; it waits on {', '.join(map(str, ids))}")
        command = Command(resume={interrupt_id: value})
    elif len(ids) > 1:
        raise ConfigError(f"thread {thread_id!r} waits on {len(ids)} interrupts: name one with --interrupt ID ({', '.join(map(str, ids))})")
    else:
        command = Command(resume=value)
    return run(graph, saver, command, _config(thread_id), action="resume", on_event=on_event)


def _checkpoint(saver: Any, thread_id: str, checkpoint_id: str) -> None:
    if saver.get_tuple(_config(thread_id, checkpoint_id)) is None:
        raise NotFoundError(f"no checkpoint {checkpoint_id!r} in thread {thread_id!r}")


def replay(graph: Any, saver: Any, thread_id: str, checkpoint_id: str, *, on_event: OnEvent | None = None) -> RunResult:
    """Run again from the past checkpoint ``checkpoint_id`` (LangGraph's time travel:
    ``invoke(None, config with checkpoint_id)``); the new checkpoints are a branch from it."""
    if graph is None:
        raise needs_graph("replay")
    _checkpoint(saver, thread_id, checkpoint_id)
    return run(graph, saver, None, _config(thread_id, checkpoint_id), action="replay", on_event=on_event)


def edit_and_run(graph: Any, saver: Any, thread_id: str, checkpoint_id: str | None, values: dict[str, Any], *,
                 as_node: str | None = None, on_event: OnEvent | None = None) -> RunResult:
    """``update_state(values, as_node=…)`` at ``checkpoint_id`` (None: the head) through the graph's
    reducers, then run on from the checkpoint it wrote. ConfigError when LangGraph refuses the update."""
    if graph is None:
        raise needs_graph("edit and run")
    if checkpoint_id is None:
        checkpoint_id = saver.run(head_op(saver.dialect, thread_id))
        if checkpoint_id is None:
            raise NotFoundError(f"no thread {thread_id!r}")
    _checkpoint(saver, thread_id, checkpoint_id)
    app = bound(graph, saver)
    try:
        new = app.update_state(_config(thread_id, checkpoint_id), values, as_node=as_node)
    except Exception as exc:  # InvalidUpdateError, a reducer's own error, an unknown node …
        raise ConfigError(f"LangGraph refused the update: {exc}") from None
    result = run(graph, saver, None, new, action="edit", on_event=on_event)
    result.started_from = checkpoint_id
    return result
