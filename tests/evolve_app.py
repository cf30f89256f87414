"""A small app that evolves v1 → v2 → v3, for the state migration tests (``threadline.evolve``).

* v1: ``write`` → ``review`` (``interrupt()`` asks for a verdict) → ``publish``; channels
  ``topic``, ``draft``, ``notes`` (a list of ``{"role", "content"}`` dicts, appended), ``result``.
* v2: channel ``draft`` renamed ``text``; node ``review`` removed, its work done by ``approve``.
* v3: the note type changed: ``{"author", "body"}`` (``Note``), validated by the state schema.

``MIGRATIONS`` takes a v1 or v2 thread to v3; ``BROKEN`` has a step that raises.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict

from threadline.evolve import Migrations


class StateV1(TypedDict, total=False):
    topic: str
    draft: str
    notes: Annotated[list[dict], operator.add]
    result: str


class StateV2(TypedDict, total=False):
    topic: str
    text: str
    notes: Annotated[list[dict], operator.add]
    result: str


class Note(TypedDict):
    author: str
    body: str


class StateV3(TypedDict, total=False):
    topic: str
    text: str
    notes: Annotated[list[Note], operator.add]
    result: str


def v1() -> StateGraph:
    def write(s: dict) -> dict:
        return {"draft": f"draft on {s['topic']}", "notes": [{"role": "writer", "content": f"wrote {s['topic']}"}]}

    def review(s: dict) -> dict:
        verdict = interrupt({"draft": s["draft"]})
        return {"notes": [{"role": "reviewer", "content": verdict}]}

    def publish(s: dict) -> dict:
        return {"result": s["draft"] + " | " + "; ".join(f"{n['role']}:{n['content']}" for n in s["notes"])}

    g = StateGraph(StateV1)
    g.add_node("write", write)
    g.add_node("review", review)
    g.add_node("publish", publish)
    g.add_edge(START, "write")
    g.add_edge("write", "review")
    g.add_edge("review", "publish")
    g.add_edge("publish", END)
    return g


def v2() -> StateGraph:
    def write(s: dict) -> dict:
        return {"text": f"draft on {s['topic']}", "notes": [{"role": "writer", "content": f"wrote {s['topic']}"}]}

    def approve(s: dict) -> dict:
        verdict = interrupt({"draft": s["text"]})
        return {"notes": [{"role": "reviewer", "content": verdict}]}

    def publish(s: dict) -> dict:
        return {"result": s["text"] + " | " + "; ".join(f"{n['role']}:{n['content']}" for n in s["notes"])}

    g = StateGraph(StateV2)
    g.add_node("write", write)
    g.add_node("approve", approve)
    g.add_node("publish", publish)
    g.add_edge(START, "write")
    g.add_edge("write", "approve")
    g.add_edge("approve", "publish")
    g.add_edge("publish", END)
    return g


def v3() -> StateGraph:
    def write(s: dict) -> dict:
        return {"text": f"draft on {s['topic']}", "notes": [{"author": "writer", "body": f"wrote {s['topic']}"}]}

    def approve(s: dict) -> dict:
        verdict = interrupt({"draft": s["text"]})
        return {"notes": [{"author": "reviewer", "body": verdict}]}

    def publish(s: dict) -> dict:
        return {"result": s["text"] + " | " + "; ".join(f"{n['author']}:{n['body']}" for n in s["notes"])}

    g = StateGraph(StateV3)
    g.add_node("write", write)
    g.add_node("approve", approve)
    g.add_node("publish", publish)
    g.add_edge(START, "write")
    g.add_edge("write", "approve")
    g.add_edge("approve", "publish")
    g.add_edge("publish", END)
    return g


def graph_v3() -> Any:
    """The v3 graph compiled without a checkpointer: what ``--graph`` names."""
    return v3().compile()


def notes_v3(notes: list[dict]) -> list[dict]:
    return [n if "author" in n else {"author": n["role"], "body": n["content"]} for n in notes]


MIGRATIONS = (
    Migrations()
    .rename_channel("draft", "text", name="v2-draft-is-text")
    .rename_node("review", "approve", name="v2-review-is-approve")
    .transform("notes", notes_v3, writes=notes_v3, name="v3-notes")
)


def _broken(notes: list[dict]) -> list[dict]:
    raise ValueError("cannot convert notes")


BROKEN = (
    Migrations()
    .rename_channel("draft", "text", name="v2-draft-is-text")
    .rename_node("review", "approve", name="v2-review-is-approve")
    .transform("notes", _broken, name="v3-notes-broken")
)
