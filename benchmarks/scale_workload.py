"""LangGraph-shaped saver calls at scale: one small real graph, recorded once, replayed per thread.

The graph (``small_graph``) is LangGraph's own ``StateGraph`` with the small, realistic
state of a chat agent: a ``messages`` channel to which each superstep appends one short
``AIMessage`` (~60 bytes of text, ~200 bytes serialized) and a ``count`` channel
(an int). ``record_small(steps)`` runs it once on a recording ``InMemorySaver`` (see
``workload.RecordingSaver``); ``for_thread`` replays those calls under another thread_id
(only the config changes, so every thread stores the same shapes and sizes).

``long_thread(tid, steps)`` yields the calls of one thread of ``steps`` supersteps without
running LangGraph for each of them (LangGraph itself takes ~5 ms a superstep, 100 s for
20,000): the first ``PREFIX`` supersteps are recorded from the real graph, and every later
superstep is the recorded steady-state superstep advanced by one — a new ``AIMessage``
written by the ``agent`` task, then the checkpoint: ids from LangGraph's ``uuid6``,
versions from ``InMemorySaver.get_next_version``, ``versions_seen``, metadata
``{"source": "loop", "step": n, "parents": {}}``. Its ``messages`` channel keeps the last
``WINDOW`` messages (a trimmed chat memory) (``WINDOW``) so that the state stays the same size and a
put's cost shows what the *history* length does to it. ``check_long_thread`` loads the
result through the real graph's ``get_state`` (it must read back count == steps).

A call is ``(kind, args, step)``: kind ``"put"`` or ``"put_writes"``, args as LangGraph
passed them, step the superstep of the checkpoint (writes: of the checkpoint they extend).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

import workload as W

PREFIX = 12  # supersteps of the long thread recorded from the real graph
WINDOW = 10  # messages the long thread keeps
_next_version = InMemorySaver().get_next_version


class State(TypedDict):
    messages: Annotated[list, add_messages]
    count: int


def keep_last(left: list, right: list) -> list:
    """The reducer of a trimmed chat memory: the last ``WINDOW`` messages."""
    return (list(left) + list(right))[-WINDOW:]


class Windowed(TypedDict):
    messages: Annotated[list, keep_last]
    count: int


def message(n: int, rnd: random.Random) -> AIMessage:
    """The n-th message of a thread: ~60 bytes of text."""
    return AIMessage(content=W.text(rnd, 60), id=f"m-{n}")


def small_graph(steps: int, windowed: bool = False, seed: int = 1) -> StateGraph:
    """The agent loop: ``steps`` supersteps of ``agent`` (one message, count + 1), then END."""
    rnd = random.Random(seed)

    def agent(state: dict) -> dict:
        n = state.get("count", 0)
        return {"messages": [message(n, rnd)], "count": n + 1}

    def route(state: dict) -> str:
        return END if state["count"] >= steps else "agent"

    b = StateGraph(Windowed if windowed else State)
    b.add_node("agent", agent)
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", route, ["agent", END])
    return b


def first_input() -> dict:
    return {"messages": [HumanMessage(content="hello, agent", id="h")], "count": 0}


def _record(graph: StateGraph, tid: str = "t") -> list[tuple[str, tuple, int]]:
    saver = W.RecordingSaver()
    config = {"configurable": {"thread_id": tid}, "recursion_limit": 10**7}
    graph.compile(checkpointer=saver).invoke(first_input(), config, durability="sync")
    out, step = [], -1
    for kind, args in saver.calls[tid]:
        if kind == "put":
            step = args[2]["step"]
        out.append((kind, args, step))
    return out


def record_small(steps: int = 50) -> list[tuple[str, tuple, int]]:
    """The calls of one thread of ``steps`` supersteps of the real graph (2 × steps + 3 calls)."""
    return _record(small_graph(steps))


def for_thread(calls: list[tuple[str, tuple, int]], tid: str) -> Iterator[tuple[str, tuple, int]]:
    """``calls`` under thread ``tid`` (a new config; the rest of the arguments shared, never mutated)."""
    for kind, args, step in calls:
        conf = {**args[0]["configurable"], "thread_id": tid}
        yield kind, ({"configurable": conf, "metadata": {**args[0].get("metadata", {}), "thread_id": tid}}, *args[1:]), step


def long_thread(tid: str, steps: int, seed: int = 2) -> Iterator[tuple[str, tuple, int]]:
    """The calls of one thread of ``steps`` supersteps (``steps`` + 2 checkpoints: the input's, then one a superstep from step 0), generated lazily."""
    recorded = _record(small_graph(PREFIX + 2, True, seed))
    # everything up to the put of superstep PREFIX - 1 is real; the graph's last superstep (END) is dropped
    head = [c for c in recorded if c[2] < PREFIX]
    while head and head[-1][0] != "put":
        head.pop()
    last_put = head[-1][1]
    yield from for_thread(head, tid)
    rnd = random.Random(seed * 7919)
    ck = last_put[1]
    config = {"configurable": {"checkpoint_ns": "", "thread_id": tid, "checkpoint_id": ck["id"]}, "metadata": {"thread_id": tid}}
    messages = list(ck["channel_values"]["messages"])
    count = ck["channel_values"]["count"]
    version = ck["channel_versions"]["messages"]
    for step in range(PREFIX, steps + 1):
        new = message(count, rnd)
        yield "put_writes", (config, [("messages", [new]), ("count", count + 1), ("branch:to:agent", None)], str(uuid6(clock_seq=step)), "~__pregel_pull, agent"), step - 1
        messages = (messages + [new])[-WINDOW:]
        count += 1
        seen, version = version, _next_version(version, None)
        checkpoint = {
            "v": 4,
            "ts": datetime.now(timezone.utc).isoformat(),
            "id": str(uuid6(clock_seq=step)),
            "channel_values": {"messages": messages, "count": count, "branch:to:agent": None},
            "channel_versions": {**ck["channel_versions"], "messages": version, "count": version, "branch:to:agent": version},
            "versions_seen": {**ck["versions_seen"], "agent": {"branch:to:agent": seen}},
            "updated_channels": ["branch:to:agent", "count", "messages"],
        }
        metadata = {"source": "loop", "step": step, "parents": {}}
        yield "put", (config, checkpoint, metadata, {"messages": version, "count": version, "branch:to:agent": version}), step
        ck = checkpoint
        config = {"configurable": {"checkpoint_ns": "", "thread_id": tid, "checkpoint_id": ck["id"]}, "metadata": {"thread_id": tid}}


def check_long_thread(saver: Any, tid: str, steps: int) -> None:
    """Raise AssertionError unless the real graph reads the thread back as written: count ==
    ``steps`` and the last ``WINDOW`` messages, the newest ``m-{steps-1}``."""
    state = small_graph(steps, True).compile(checkpointer=saver).get_state({"configurable": {"thread_id": tid}})
    values = state.values
    assert values["count"] == steps, (tid, values.get("count"))
    assert len(values["messages"]) == WINDOW and values["messages"][-1].id == f"m-{steps - 1}", values["messages"][-1]


def check_small_thread(saver: Any, tid: str, steps: int) -> None:
    """Raise AssertionError unless the thread reads back complete: count == ``steps``, ``steps`` + 1 messages."""
    values = small_graph(steps).compile(checkpointer=saver).get_state({"configurable": {"thread_id": tid}}).values
    assert values["count"] == steps and len(values["messages"]) == steps + 1, (tid, values.get("count"), len(values.get("messages", [])))
