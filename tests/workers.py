"""A small deterministic chat graph and a process worker, shared by the concurrency tests.

Kept outside the test modules so ``multiprocessing`` (spawn) can import it in
child processes without pytest.
"""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph


class ChatState(TypedDict, total=False):
    messages: Annotated[list, operator.add]
    turns: int
    notes: dict


def _respond(state: ChatState) -> ChatState:
    last = state["messages"][-1]
    return {"messages": [f"reply to {last}"], "turns": state.get("turns", 0) + 1}


def _note(state: ChatState) -> ChatState:
    notes = dict(state.get("notes") or {})
    notes[f"t{state['turns']}"] = len(state["messages"])
    return {"notes": notes}


def build_chat():
    g = StateGraph(ChatState)
    g.add_node("respond", _respond)
    g.add_node("note", _note)
    g.add_edge(START, "respond")
    g.add_edge("respond", "note")
    g.add_edge("note", END)
    return g


def user_message(thread_id: str, turn: int) -> str:
    return f"{thread_id} says {turn}"


def expected_state(thread_id: str, turns: int) -> dict:
    messages, notes = [], {}
    for t in range(turns):
        messages += [user_message(thread_id, t), f"reply to {user_message(thread_id, t)}"]
        notes[f"t{t + 1}"] = len(messages)
    return {"messages": messages, "turns": turns, "notes": notes}


def run_threads(url: str, thread_ids: list[str], turns: int) -> None:
    """Process entry point: run ``turns`` turns on each thread through a saver opened from ``url``."""
    from threadline import open_saver

    with open_saver(url) as saver:
        graph = build_chat().compile(checkpointer=saver)
        for turn in range(turns):
            for tid in thread_ids:
                graph.invoke({"messages": [user_message(tid, turn)]}, {"configurable": {"thread_id": tid}})
