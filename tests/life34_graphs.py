"""A small real graph for the tags, channel history, merge and bulk-edit tests.

``build(checkpointer)`` compiles a one-node chat graph: ``messages`` (``add_messages``),
``labels`` (a custom reducer: a sorted union), ``profile`` (a dict, last value wins) and
``turns`` (a plain int). ``graph`` is it compiled without a checkpointer
(``--graph life34_graphs:graph``); ``chat(saver, thread, *texts)`` runs turns.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages


def union(left: list[str] | None, right: list[str] | None) -> list[str]:
    """The custom reducer: a sorted union of labels."""
    return sorted(set(left or []) | set(right or []))


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    labels: Annotated[list[str], union]
    profile: dict[str, Any]
    turns: int


def reply(state: State) -> dict:
    msgs = state.get("messages") or []
    last = str(msgs[-1].content) if msgs else ""
    return {
        "messages": [AIMessage(content=f"re: {last}", id=f"ai-{len(msgs)}-{last[:8]}")],
        "labels": [last.split()[0]] if last else [],
        "turns": (state.get("turns") or 0) + 1,
    }


def build(checkpointer: Any = None):
    b = StateGraph(State)
    b.add_node("reply", reply)
    b.add_edge(START, "reply")
    b.add_edge("reply", END)
    return b.compile(checkpointer=checkpointer)


graph = build()


def cfg(thread_id: str, checkpoint_id: str | None = None) -> dict:
    c: dict[str, Any] = {"thread_id": thread_id}
    if checkpoint_id:
        c["checkpoint_id"] = checkpoint_id
    return {"configurable": c}


def chat(saver: Any, thread_id: str, *texts: str) -> Any:
    g = build(saver)
    for i, text in enumerate(texts):
        g.invoke({"messages": [HumanMessage(content=text, id=f"h-{thread_id}-{text[:8]}-{i}")]}, cfg(thread_id))
    return g
