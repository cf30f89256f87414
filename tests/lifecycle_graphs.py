"""Small real LangGraph graphs used by the lifecycle/history/CLI/export tests.

``build_graph(checkpointer)`` compiles a graph with a conditional branch, a parallel
fan-out, reducers (messages by id, dict merge, integer sum), a compiled subgraph and
an optional human-in-the-loop interrupt. ``graph`` is the same graph compiled
without a checkpointer, for ``--graph lifecycle_graphs:graph``.
``populate(saver)`` runs it on several threads, including a rollback-style fork
made through LangGraph itself, so the database holds branches, subgraph
namespaces, pending writes and an interrupt.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt


def merge_dicts(left: dict | None, right: dict | None) -> dict:
    return {**(left or {}), **(right or {})}


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    notes: Annotated[dict[str, Any], merge_dicts]
    route: str
    hits: Annotated[int, operator.add]
    approved: bool


class SubState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    notes: Annotated[dict[str, Any], merge_dicts]


def _last_text(state: State) -> str:
    msgs = state.get("messages") or []
    return str(msgs[-1].content) if msgs else ""


def classify(state: State) -> dict:
    text = _last_text(state)
    return {"route": "research" if "?" in text else "answer", "notes": {"classified": text[:20]}}


def search_a(state: State) -> dict:
    return {"hits": 2, "notes": {"a": "found 2"}}


def search_b(state: State) -> dict:
    return {"hits": 3, "notes": {"b": "found 3"}}


def merge(state: State) -> dict:
    n = len(state.get("messages") or [])
    return {"messages": [AIMessage(content=f"research done: {state.get('hits', 0)} hits", id=f"ai-research-{n}")]}


def answer(state: State) -> dict:
    n = len(state.get("messages") or [])
    return {"messages": [AIMessage(content=f"answer to {_last_text(state)!r}", id=f"ai-answer-{n}")]}


def sub_draft(state: SubState) -> dict:
    n = len(state.get("messages") or [])
    return {"messages": [AIMessage(content="draft reviewed", id=f"ai-review-{n}")], "notes": {"reviewed": True}}


def sub_polish(state: SubState) -> dict:
    return {"notes": {"polished": True}}


def build_subgraph():
    b = StateGraph(SubState)
    b.add_node("draft", sub_draft)
    b.add_node("polish", sub_polish)
    b.add_edge(START, "draft")
    b.add_edge("draft", "polish")
    b.add_edge("polish", END)
    return b.compile()


def approve(state: State) -> dict:
    if not (state.get("notes") or {}).get("needs_approval"):
        return {"approved": True}
    decision = interrupt({"question": "approve the answer?"})
    return {"approved": bool(decision), "notes": {"decision": decision}}


def route(state: State) -> list[str] | str:
    return ["search_a", "search_b"] if state.get("route") == "research" else "answer"


def build_graph(checkpointer: Any = None):
    b = StateGraph(State)
    b.add_node("classify", classify)
    b.add_node("search_a", search_a)
    b.add_node("search_b", search_b)
    b.add_node("merge", merge)
    b.add_node("answer", answer)
    b.add_node("review", build_subgraph())
    b.add_node("approve", approve)
    b.add_edge(START, "classify")
    b.add_conditional_edges("classify", route, ["search_a", "search_b", "answer"])
    b.add_edge("search_a", "merge")
    b.add_edge("search_b", "merge")
    b.add_edge("merge", "review")
    b.add_edge("answer", "review")
    b.add_edge("review", "approve")
    b.add_edge("approve", END)
    return b.compile(checkpointer=checkpointer)


graph = build_graph()


def cfg(thread_id: str, **extra: Any) -> dict:
    return {"configurable": {"thread_id": thread_id, **extra}}


def human(text: str, mid: str) -> dict:
    return {"messages": [HumanMessage(content=text, id=mid)]}


def populate(saver: Any) -> dict[str, Any]:
    """Run the graph on a few threads; returns facts the tests check against.

    * ``t-research``: two turns (a question → fan-out branch, then a statement),
      then LangGraph time travel: re-run from the checkpoint after the first turn
      with a different input, so the thread has two branches.
    * ``t-answer``: one turn through the ``answer`` branch.
    * ``t-interrupt``: stops at the ``approve`` interrupt (pending writes at the head).
    """
    g = build_graph(saver)
    g.invoke(human("what is a checkpoint?", "h1"), cfg("t-research"), )
    first_turn = g.get_state(cfg("t-research")).config
    g.invoke(human("thanks", "h2"), cfg("t-research"))
    # time travel: branch from the end of the first turn
    g.invoke(human("and a blob?", "h3"), {"configurable": {**first_turn["configurable"]}})
    g.invoke(human("hello there", "h4"), cfg("t-answer", user="ada"), )
    g.invoke({**human("please approve", "h5"), "notes": {"needs_approval": True}}, cfg("t-interrupt"))
    return {"fork_point": first_turn["configurable"]["checkpoint_id"]}


def resume_interrupt(saver: Any, thread_id: str = "t-interrupt", decision: Any = True) -> dict:
    return build_graph(saver).invoke(Command(resume=decision), cfg(thread_id))
