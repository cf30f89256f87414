"""Databases and clients for the ``threadline ui`` tests.

* ``demo_db(path)``: the real ``threadline demo`` run (SQLite): two branches, an answered
  interrupt;
* ``demo_on(saver)``: the same scenario driven on any saver (used for Postgres);
* ``hostile(saver)``: a thread whose messages, metadata and thread_id carry HTML and
  script payloads;
* ``errored(saver)`` / ``paused(saver)``: a thread whose last step raised, and one
  waiting at an ``interrupt()``;
* fixtures ``demo_path`` (the demo database, once per module) and ``demo_copy`` (a
  private copy, for tests that write);
* ``client(config)``: a Starlette ``TestClient`` holding this run's token cookie;
* ``running(config)``: the app served by uvicorn on a loopback port, for the browser;
* ``loopback_opener()``: urllib with a cookie jar, reaching the UI's ``*.localhost`` name as a
  browser does.
"""

from __future__ import annotations

import http.client
import io
import socket
import sqlite3
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt
from rich.console import Console
from starlette.testclient import TestClient

from threadline.demo import BRANCH_MESSAGE, RESUME, THREAD_ID, TURNS, compile_graph, run_demo
from threadline.demo.agent import new_id
from threadline.web import UIConfig, create_app
from threadline.web.server import bind, make_server, url_of

HOSTILE_ID = 'evil"><script>window.__pwned=1</script>'
PAYLOADS = (
    "<script>window.__pwned = 1; alert(1)</script>",
    '"><img src=x onerror="window.__pwned=1">',
    "javascript:window.__pwned=1",
    "<a href=\"javascript:window.__pwned=1\">click</a>",
    "{{ 7*7 }} {% raw %}",
)


def demo_db(path: str) -> str:
    run_demo(path, Console(file=io.StringIO(), width=120))
    return path


def demo_on(saver: Any) -> dict[str, Any]:
    """The demo's scenario (two turns, interrupt, resume, time travel) on ``saver``."""
    graph = compile_graph(saver)
    cfg = {"configurable": {"thread_id": THREAD_ID}}
    for text in TURNS:
        graph.invoke({"messages": [HumanMessage(text, id=new_id())]}, cfg)
    graph.invoke(Command(resume=RESUME), cfg)
    history = list(graph.get_state_history(cfg))
    turn_end = [s for s in reversed(history) if not s.next and s.metadata.get("source") == "loop"][0]
    graph.invoke({"messages": [HumanMessage(BRANCH_MESSAGE, id=new_id())]}, turn_end.config)
    return {"branch_point": turn_end.config["configurable"]["checkpoint_id"]}


class Chat(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    notes: dict[str, Any]


def _echo_graph(saver: Any, node: Any):
    g = StateGraph(Chat)
    g.add_node("reply", node)
    g.add_edge(START, "reply")
    g.add_edge("reply", END)
    return g.compile(checkpointer=saver)


def hostile(saver: Any) -> str:
    """A thread (with an HTML thread_id) whose state and metadata are script payloads."""

    def reply(state: Chat) -> dict:
        return {
            "messages": [
                AIMessage(PAYLOADS[1], id="ai-1", tool_calls=[{"name": "<img src=x onerror=alert(1)>", "args": {"q": PAYLOADS[0]}, "id": "call-1"}]),
                ToolMessage(PAYLOADS[2], id="tool-1", tool_call_id="call-1", name="<script>x</script>"),
                AIMessage(PAYLOADS[3], id="ai-2"),
            ],
            "notes": {PAYLOADS[0]: PAYLOADS[1], "link": PAYLOADS[2]},
        }

    cfg = {"configurable": {"thread_id": HOSTILE_ID}, "metadata": {"user": PAYLOADS[1]}}
    _echo_graph(saver, reply).invoke({"messages": [HumanMessage(PAYLOADS[0], id="h-1")]}, cfg)
    return HOSTILE_ID


def errored(saver: Any, thread_id: str = "t-error") -> str:
    def reply(state: Chat) -> dict:
        raise RuntimeError("the model timed out <b>bold</b>")

    try:
        _echo_graph(saver, reply).invoke({"messages": [HumanMessage("hi", id="h-err")]}, {"configurable": {"thread_id": thread_id}})
    except RuntimeError:
        pass
    return thread_id


def paused(saver: Any, thread_id: str = "t-paused") -> str:
    def reply(state: Chat) -> dict:
        answer = interrupt({"question": "ship it?", "draft": "v2"})
        return {"messages": [AIMessage(f"ok: {answer}", id="ai-paused")]}

    _echo_graph(saver, reply).invoke({"messages": [HumanMessage("ship", id="h-paused")]}, {"configurable": {"thread_id": thread_id}})
    return thread_id


def echo_turn(saver: Any, thread_id: str, text: str) -> None:
    """One more turn on a thread of the echo graph (new checkpoints, for live updates)."""

    def reply(state: Chat) -> dict:
        return {"messages": [AIMessage(f"echo: {text}", id=new_id())]}

    _echo_graph(saver, reply).invoke({"messages": [HumanMessage(text, id=new_id())]}, {"configurable": {"thread_id": thread_id}})


@pytest.fixture(scope="module")
def demo_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    return demo_db(str(tmp_path_factory.mktemp("demo") / "demo.db"))


@pytest.fixture
def demo_copy(demo_path: str, tmp_path: Path) -> str:
    """A private copy of the demo database, for tests that write."""
    target = str(tmp_path / "demo.db")
    src, dst = sqlite3.connect(demo_path), sqlite3.connect(target)
    src.backup(dst)
    src.close(), dst.close()
    return target


@contextmanager
def client(config: UIConfig) -> Iterator[TestClient]:
    """A TestClient on ``create_app(config)`` (lifespan run), at this run's own host name, that has
    exchanged the token for the cookie."""
    config.guard.port = config.port = config.port or 8765
    with TestClient(create_app(config), base_url=config.guard.origin) as c:
        r = c.get(f"/?token={config.guard.token}", follow_redirects=False)
        assert r.status_code == 303 and config.guard.cookie in r.headers["set-cookie"]
        yield c


@contextmanager
def running(config: UIConfig) -> Iterator[str]:
    """Serve ``config`` with uvicorn on a free loopback port; yields the URL with the token."""
    sock = bind("127.0.0.1", 0)
    server = make_server(config, sock)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the ui server did not start")
        time.sleep(0.05)
    try:
        yield url_of(config)
    finally:
        server.should_exit = True
        thread.join(10)


class _LoopbackConnection(http.client.HTTPConnection):
    def connect(self) -> None:
        host = "127.0.0.1" if self.host.endswith(".localhost") else self.host
        self.sock = socket.create_connection((host, self.port), self.timeout)


class _LoopbackHandler(urllib.request.HTTPHandler):
    def http_open(self, req: Any) -> Any:
        return self.do_open(_LoopbackConnection, req)


def loopback_opener() -> urllib.request.OpenerDirector:
    """An urllib opener with a cookie jar that connects to 127.0.0.1 for ``*.localhost`` names (the
    ``Host`` header still naming them), as browsers do: this machine's resolver may not know them."""
    return urllib.request.build_opener(_LoopbackHandler(), urllib.request.HTTPCookieProcessor())
