"""A chat graph whose node waits on marker files, and the process that runs one turn of it,
for the thread guard's tests (``test_guard.py``).

Kept outside the test modules so ``multiprocessing`` (spawn) can import it in child processes
without pytest. Runs overlap through files, not sleeps: the node of turn ``X`` first creates
``X.in`` in the shared directory (the run is inside the graph, its input checkpoint written),
then waits until every file its turn is told to wait for exists.
"""

from __future__ import annotations

import asyncio
import json
import operator
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph

from threadline import LeaseLostError, ThreadBusyError
from threadline.backends import entry_of
from threadline.guard import guarded

WAIT_LIMIT = 30.0  # seconds a node waits for its files before failing the run


class Chat(TypedDict):
    messages: Annotated[list, operator.add]


def build(directory: str, wait_for: dict[str, list[str]]) -> StateGraph:
    """The one-node graph: it replies to the last message once that turn's files exist."""

    def respond(state: Chat) -> Chat:
        turn = state["messages"][-1]
        Path(directory, f"{turn}.in").touch()
        deadline = time.monotonic() + WAIT_LIMIT
        while not all(Path(directory, f).exists() for f in wait_for.get(turn, ())):
            if time.monotonic() > deadline:
                raise TimeoutError(f"turn {turn!r} waited {WAIT_LIMIT} s for {wait_for[turn]}")
            time.sleep(0.01)
        return {"messages": [f"reply to {turn}"]}

    return StateGraph(Chat).add_node("respond", respond).add_edge(START, "respond").add_edge("respond", END)


def run_turn(url: str, thread_id: str, turn: str, directory: str, wait_for: dict[str, list[str]],
             guard: dict[str, Any] | None, result: str, asynchronous: bool = False) -> None:
    """One turn on ``thread_id`` (``guard``: ``guarded``'s options, None: unguarded; ``asynchronous``:
    the async saver and ``ainvoke``); what happened goes to the JSON file ``result``: ``{"ok":
    messages}``, ``{"busy": message, "holder": …}`` or ``{"lost": message, …}`` (``LeaseLostError``)."""
    inputs, config = {"messages": [turn]}, {"configurable": {"thread_id": thread_id}}

    def app_of(saver: Any) -> Any:
        app = build(directory, wait_for).compile(checkpointer=saver)
        return app if guard is None else guarded(app, **guard)

    async def arun() -> Any:
        async with entry_of(url).get("async_saver").from_conn_string(url) as saver:
            return await app_of(saver).ainvoke(inputs, config)

    try:
        if asynchronous:
            out = asyncio.run(arun())
        else:
            with entry_of(url).get("saver").from_conn_string(url) as saver:
                out = app_of(saver).invoke(inputs, config)
        Path(result).write_text(json.dumps({"ok": out["messages"]}))
    except LeaseLostError as exc:
        Path(result).write_text(json.dumps({"lost": str(exc), "thread_id": exc.thread_id, "token": exc.token,
                                            "holder": exc.holder, "holder_token": exc.holder_token}))
    except ThreadBusyError as exc:
        Path(result).write_text(json.dumps({"busy": str(exc), "holder": exc.holder}))
