"""LangGraph's Agent Server (``langgraph dev``) on threadline's saver and store (docs/agent-server.md).

The test writes a ``langgraph.json`` naming ``threadline.server.checkpointer`` and
``threadline.server.store`` and an approval graph that stops at ``interrupt()``, starts the real
``langgraph dev`` on a free loopback port, and drives it through the LangGraph SDK: a thread, a
run that stops at the interrupt, a resume with ``Command(resume=…)``, the history and a Store
item. It then reads the same database with threadline: ``threadline threads`` (while the thread
waits and after), the checkpoint tree, a fresh saver's final state and the Store item; and rolls
the thread back with ``threadline rollback``, which the server then reads and resumes from. On SQLite,
Postgres (a fresh schema) and Redis (a key prefix of its own).

The server package (``langgraph-cli[inmem]``) is in the ``[test]`` extra: without it the tests
skip, except under ``CI=true``, where that is a failure. They are marked ``agent_server``
(``-m 'not agent_server'`` leaves them out). Each run takes a few seconds on a quiet machine.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from backends import fresh_postgres_url, in_ci
from redis_support import plain_target
from threadline import aopen_saver, open_saver, read
from threadline.cli import app
from threadline.errors import ConfigError
from threadline.store import open_store

GRAPH = '''
from typing import TypedDict

from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class State(TypedDict, total=False):
    request: str
    draft: str
    decision: str


def draft(state: State) -> State:
    return {"draft": f"refund for {state['request']}"}


def approve(state: State) -> State:
    answer = interrupt({"question": "approve?", "draft": state["draft"]})
    get_store().put(("decisions",), state["request"], {"answer": answer})
    return {"decision": answer}


builder = StateGraph(State)
builder.add_node("draft", draft)
builder.add_node("approve", approve)
builder.add_edge(START, "draft")
builder.add_edge("draft", "approve")
builder.add_edge("approve", END)
graph = builder.compile()
'''

STARTUP_SECONDS = 45


def _langgraph_cli() -> Path:
    """The ``langgraph`` command beside this Python; skips (fails under CI=true) when the
    server package is not installed."""
    exe = Path(sys.executable).with_name("langgraph")
    if importlib.util.find_spec("langgraph_api") is None or not exe.exists():
        reason = "LangGraph's Agent Server is not installed (pip install 'langgraph-cli[inmem]', in the [test] extra)"
        if in_ci():
            pytest.fail(f"CI=true and {reason}", pytrace=False)
        pytest.skip(reason)
    return exe


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _log_tail(log: Path) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-30:])


def _stop(proc: subprocess.Popen) -> None:
    """End the server's process group (the CLI, uvicorn and their workers): TERM, then KILL."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def _start(app_dir: Path, db_url: str | None) -> tuple[subprocess.Popen, str, Path]:
    """``langgraph dev`` on ``app_dir``'s langgraph.json (``THREADLINE_DB`` = ``db_url`` in its
    "env", none when None), bound to 127.0.0.1 on a free port, in its own process group; returns the process,
    its URL and its log."""
    exe = _langgraph_cli()
    (app_dir / "agent.py").write_text(GRAPH)
    (app_dir / "langgraph.json").write_text(json.dumps({
        "dependencies": ["."],
        "graphs": {"approval": "./agent.py:graph"},
        "checkpointer": {"path": "threadline.server.checkpointer"},
        "store": {"path": "threadline.server.store"},
        "env": {} if db_url is None else {"THREADLINE_DB": db_url},
    }))
    port = _free_port()
    log = app_dir.parent / f"server-{port}.log"  # outside the app's directory
    env = {k: v for k, v in os.environ.items() if not k.startswith("THREADLINE_")}
    env.update({"LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGSMITH_TRACING": "false", "NO_COLOR": "1"})
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(exe), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", str(port)],
            cwd=app_dir, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    return proc, f"http://127.0.0.1:{port}", log


def _wait_ready(proc: subprocess.Popen, url: str, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"langgraph dev exited ({proc.returncode}) before it served:\n{_log_tail(log)}", pytrace=False)
        try:
            if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    pytest.fail(f"langgraph dev did not answer within {STARTUP_SECONDS} s:\n{_log_tail(log)}", pytrace=False)


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database: a SQLite file, a new Postgres schema, or a key prefix of its own on
    the plain Redis (the schema and the keys are dropped after the test)."""
    if request.param == "sqlite":
        return str(tmp_path / "threads.db")
    if request.param == "postgres":
        return fresh_postgres_url(request)
    target = plain_target(request)
    return f"{target.url}{'&' if '?' in target.url else '?'}prefix={target.prefix}"


@pytest.fixture
def server(tmp_path: Path, db_url: str) -> Iterator[str]:
    """The URL of a running ``langgraph dev`` on threadline's saver and store at ``db_url``."""
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    proc, url, log = _start(app_dir, db_url)
    try:
        _wait_ready(proc, url, log)
        yield url
    finally:
        _stop(proc)
    assert "Using custom checkpointer: Async" in log.read_text(errors="replace"), _log_tail(log)


def _threads(db_url: str, *options: str) -> list[dict]:
    result = CliRunner().invoke(app, ["threads", "--db", db_url, "--json", *options])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["threads"]


@pytest.mark.agent_server
async def test_run_interrupt_resume_through_the_sdk_seen_by_threadline(server: str, db_url: str) -> None:
    from langgraph_sdk import get_client

    client = get_client(url=server)
    thread = await client.threads.create(metadata={"customer": "ada"})
    tid = thread["thread_id"]

    first = await client.runs.wait(tid, "approval", input={"request": "order-7"})
    assert first["draft"] == "refund for order-7"
    assert [i["value"] for i in first["__interrupt__"]] == [{"question": "approve?", "draft": "refund for order-7"}]
    waiting = await client.threads.get_state(tid)
    assert waiting["next"] == ["approve"]

    # threadline sees the waiting thread while the server runs, with the server's run metadata
    [listed] = _threads(db_url, "--status", "interrupted")
    assert listed["thread_id"] == tid
    assert listed["status"]["next"] == ["approve"]
    assert [i["value"] for i in listed["status"]["interrupts"]] == [{"question": "approve?", "draft": "refund for order-7"}]

    final = await client.runs.wait(tid, "approval", command={"resume": "approved"})
    assert final == {"request": "order-7", "draft": "refund for order-7", "decision": "approved"}
    history = await client.threads.get_history(tid)
    assert [h["next"] for h in history] == [[], ["approve"], ["draft"], ["__start__"]]
    item = await client.store.get_item(["decisions"], "order-7")
    assert item["value"] == {"answer": "approved"}

    # the same thread in threadline: listing, filters on the server's checkpoint metadata, the tree
    [done] = _threads(db_url)
    assert done["thread_id"] == tid and done["status"]["kind"] == "done"
    assert done["checkpoint_count"] == len(history)
    assert done["head_checkpoint_id"] == history[0]["checkpoint"]["checkpoint_id"]
    assert [t["thread_id"] for t in _threads(db_url, "--where", "graph_id=approval", "--where", "customer=ada")] == [tid]
    assert _threads(db_url, "--status", "interrupted") == []
    with open_saver(db_url) as saver:
        page = read.list_threads(saver)
        assert [t.thread_id for t in page.threads] == [tid]
        tree = read.thread_history(saver, tid)
        assert set(tree.nodes[""]) == {h["checkpoint"]["checkpoint_id"] for h in history}
        assert tree.head == history[0]["checkpoint"]["checkpoint_id"]

    # a fresh saver (a restarted process) reads the final state; the Store item is threadline's
    async with aopen_saver(db_url) as fresh:
        head = await fresh.aget_tuple({"configurable": {"thread_id": tid}})
        assert head is not None
        assert head.checkpoint["id"] == history[0]["checkpoint"]["checkpoint_id"]
        assert {k: head.checkpoint["channel_values"][k] for k in final} == final
        assert head.metadata["graph_id"] == "approval"
    with open_store(db_url) as store:
        stored = store.get(("decisions",), "order-7")
        assert stored is not None and stored.value == {"answer": "approved"}

    # a rollback made with threadline is the state the server reads and runs on next
    rolled = CliRunner().invoke(app, ["rollback", "--db", db_url, tid, "HEAD~1"])
    assert rolled.exit_code == 0, rolled.output
    back = await client.threads.get_state(tid)
    assert back["next"] == ["approve"] and "decision" not in back["values"]
    again = await client.runs.wait(tid, "approval", command={"resume": "rejected"})
    assert again["decision"] == "rejected"
    with open_saver(db_url) as saver:
        tree = read.thread_history(saver, tid)
        assert len(tree.nodes[""]) == len(history) + 2  # the rollback checkpoint and the new run's
        assert history[0]["checkpoint"]["checkpoint_id"] in tree.nodes[""]  # the first answer stays on its branch
        assert tree.head == (await client.threads.get_state(tid))["checkpoint"]["checkpoint_id"]


@pytest.mark.agent_server
def test_server_without_threadline_db_stops_at_startup_naming_it(tmp_path: Path) -> None:
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    proc, _, log = _start(app_dir, None)
    try:
        proc.wait(timeout=STARTUP_SECONDS)
    except subprocess.TimeoutExpired:
        pytest.fail(f"langgraph dev kept running without $THREADLINE_DB:\n{_log_tail(log)}", pytrace=False)
    finally:
        _stop(proc)
    assert proc.returncode != 0
    text = log.read_text(errors="replace")
    assert "ConfigError: threadline.server: set $THREADLINE_DB to the database" in text, _log_tail(log)


async def test_factories_without_threadline_db_say_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    from threadline import server

    monkeypatch.delenv("THREADLINE_DB", raising=False)
    for factory in (server.checkpointer, server.store):
        with pytest.raises(ConfigError, match=r"set \$THREADLINE_DB to the database"):
            async with factory():
                pass
    monkeypatch.setenv("THREADLINE_DB", "   ")
    with pytest.raises(ConfigError, match="THREADLINE_DB"):
        server.database_url()
