"""A small app that evolves v1 → v2 → v3, for the state migration tests (``threadline.evolve``).

* v1: ``write`` → ``review`` (``interrupt()`` asks for a verdict) → ``publish``; channels
  ``topic``, ``draft``, ``notes`` (a list of ``{"role", "content"}`` dicts, appended), ``result``.
* v2: channel ``draft`` renamed ``text``; node ``review`` removed, its work done by ``approve``.
* v3: the note type changed: ``{"author", "body"}`` (``Note``), validated by the state schema.

``MIGRATIONS`` takes a v1 or v2 thread to v3, ``MIGRATIONS_V2`` a v1 thread to v2; ``BROKEN`` has a step that raises.
``fan_out(worker)``: a graph whose ``Send`` tasks interrupt; ``FAN_MIGRATIONS`` renames ``worker`` ``helper``.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send, interrupt
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


def _app(state: type, text: str, gate: str, note: tuple[str, str]) -> StateGraph:
    """The app as one version writes it: its state schema, the channel holding the draft, the
    node that asks for the verdict, the keys of a note."""
    who, says = note

    def write(s: dict) -> dict:
        return {text: f"draft on {s['topic']}", "notes": [{who: "writer", says: f"wrote {s['topic']}"}]}

    def ask(s: dict) -> dict:
        return {"notes": [{who: "reviewer", says: interrupt({"draft": s[text]})}]}

    def publish(s: dict) -> dict:
        return {"result": s[text] + " | " + "; ".join(f"{n[who]}:{n[says]}" for n in s["notes"])}

    g = StateGraph(state)
    g.add_node("write", write)
    g.add_node(gate, ask)
    g.add_node("publish", publish)
    g.add_edge(START, "write")
    g.add_edge("write", gate)
    g.add_edge(gate, "publish")
    g.add_edge("publish", END)
    return g


def v1() -> StateGraph:
    return _app(StateV1, "draft", "review", ("role", "content"))


def v2() -> StateGraph:
    return _app(StateV2, "text", "approve", ("role", "content"))


def v3() -> StateGraph:
    return _app(StateV3, "text", "approve", ("author", "body"))


def graph_v2() -> Any:
    """The v2 graph compiled without a checkpointer."""
    return v2().compile()


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


# v1 → v2 only: what a deploy of v2 ships
MIGRATIONS_V2 = (
    Migrations()
    .rename_channel("draft", "text", name="v2-draft-is-text")
    .rename_node("review", "approve", name="v2-review-is-approve")
)


class FanState(TypedDict, total=False):
    items: list[str]
    done: Annotated[list[str], operator.add]


def fan_out(worker: str) -> StateGraph:
    """``fan`` sends each item to ``worker`` (a ``Send`` task), which asks for a verdict."""

    def work(s: dict) -> dict:
        return {"done": [f"{s['items'][0]}:{interrupt('ok?')}"]}

    g = StateGraph(FanState)
    g.add_node("fan", lambda s: {})
    g.add_node(worker, work)
    g.add_edge(START, "fan")
    g.add_conditional_edges("fan", lambda s: [Send(worker, {"items": [i]}) for i in s["items"]], [worker])
    g.add_edge(worker, END)
    return g


def fan_v2() -> Any:
    return fan_out("helper").compile()


FAN_MIGRATIONS = Migrations().rename_node("worker", "helper", name="v2-worker-is-helper")


def _broken(notes: list[dict]) -> list[dict]:
    raise ValueError("cannot convert notes")


BROKEN = (
    Migrations()
    .rename_channel("draft", "text", name="v2-draft-is-text")
    .rename_node("review", "approve", name="v2-review-is-approve")
    .transform("notes", _broken, name="v3-notes-broken")
)
