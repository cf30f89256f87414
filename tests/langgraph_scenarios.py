"""The helper behind the LangGraph scenarios (``test_langgraph.py``, ``test_langgraph_writes.py``).

``Graph`` drives one compiled graph with sync methods for sync savers and
``a``-methods for async ones, so each scenario is written once; ``opened``
compiles a graph on a NEW saver of a threadline backend, ``reference`` on
LangGraph's ``InMemorySaver`` (the oracle); ``cfg``, ``cid``, ``shape`` and
``assert_parent_links`` build configs and compare runs. Also the graphs several
scenarios share (``chat_builder``, ``line_builder``); a graph only one scenario
uses stays next to its test.
"""

from __future__ import annotations

import itertools
import operator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any

from backends import Backend
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import StateSnapshot
from typing_extensions import TypedDict

# --- the helper: one scenario, sync or async ------------------------------------


@dataclass
class Graph:
    """A compiled graph and how to drive it: sync methods for sync savers, ``a``-methods for async ones."""

    compiled: Any
    is_async: bool

    async def invoke(self, input: Any, config: dict, **kw: Any) -> Any:
        if self.is_async:
            return await self.compiled.ainvoke(input, config, **kw)
        return self.compiled.invoke(input, config, **kw)

    async def state(self, config: dict, *, subgraphs: bool = False) -> StateSnapshot:
        if self.is_async:
            return await self.compiled.aget_state(config, subgraphs=subgraphs)
        return self.compiled.get_state(config, subgraphs=subgraphs)

    async def history(self, config: dict, **kw: Any) -> list[StateSnapshot]:
        if self.is_async:
            return [s async for s in self.compiled.aget_state_history(config, **kw)]
        return list(self.compiled.get_state_history(config, **kw))

    async def update(self, config: dict, values: Any, as_node: str | None = None) -> dict:
        if self.is_async:
            return await self.compiled.aupdate_state(config, values, as_node=as_node)
        return self.compiled.update_state(config, values, as_node=as_node)

    @property
    def saver(self) -> Any:
        return self.compiled.checkpointer


@asynccontextmanager
async def opened(backend: Backend, builder: StateGraph, **compile_kw: Any):
    """A NEW saver instance on ``backend``'s database and ``builder`` compiled on it."""
    if backend.is_async:
        async with backend.open() as saver:
            yield Graph(builder.compile(checkpointer=saver, **compile_kw), True)
    else:
        with backend.open() as saver:
            yield Graph(builder.compile(checkpointer=saver, **compile_kw), False)


def reference(builder: StateGraph, **compile_kw: Any) -> Graph:
    """The same graph on LangGraph's InMemorySaver (the oracle)."""
    return Graph(builder.compile(checkpointer=InMemorySaver(), **compile_kw), False)


def cfg(thread_id: str, checkpoint_id: str | None = None, ns: str | None = None) -> dict:
    conf: dict[str, Any] = {"thread_id": thread_id}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    if ns is not None:
        conf["checkpoint_ns"] = ns
    return {"configurable": conf}


def cid(config_or_snapshot: Any) -> str:
    config = config_or_snapshot.config if isinstance(config_or_snapshot, StateSnapshot) else config_or_snapshot
    return config["configurable"]["checkpoint_id"]


def shape(snap: StateSnapshot) -> tuple:
    """What must agree between two savers for the same run (ids and timestamps differ)."""
    return (
        snap.values,
        snap.next,
        snap.metadata["step"],
        snap.metadata["source"],
        tuple((t.name, tuple(i.value for i in t.interrupts)) for t in snap.tasks),
        snap.parent_config is None,
    )


def assert_parent_links(history: list[StateSnapshot]) -> None:
    """Newest first, each snapshot's parent is the next one in the list; the oldest is a root."""
    for newer, older in itertools.pairwise(history):
        assert newer.parent_config is not None
        assert cid(newer.parent_config) == cid(older)
    assert history[-1].parent_config is None


# --- graphs -------------------------------------------------------------------


class ChatState(TypedDict):
    turns: Annotated[list[str], operator.add]


def chat_builder() -> StateGraph:
    def reply(state: ChatState) -> dict:
        return {"turns": [f"echo:{state['turns'][-1]}"]}

    b = StateGraph(ChatState)
    b.add_node("reply", reply)
    b.add_edge(START, "reply")
    b.add_edge("reply", END)
    return b


class LineState(TypedDict):
    log: Annotated[list[str], operator.add]
    x: int


def line_builder(names: tuple[str, ...] = ("a", "b", "c")) -> StateGraph:
    b = StateGraph(LineState)
    prev = START
    for name in names:

        def node(state: LineState, name=name) -> dict:
            return {"log": [f"{name}:{state['x']}"], "x": state["x"] + 1}

        b.add_node(name, node)
        b.add_edge(prev, name)
        prev = name
    b.add_edge(prev, END)
    return b


def chain_builder(nodes: int) -> StateGraph:
    """LangGraph's ``sequential`` benchmark graph: ``MessagesState`` through ``nodes`` no-op nodes in a
    row (a channel each: a wide checkpoint whose channels are nearly all empty)."""
    from langgraph.graph import MessagesState

    b = StateGraph(MessagesState)
    names = [f"node_{i}" for i in range(nodes)]
    for name in names:
        b.add_node(name, lambda state: None)
    for a, z in zip([START, *names], [*names, END]):
        b.add_edge(a, z)
    return b
