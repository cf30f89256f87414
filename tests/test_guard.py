"""The thread guard (``threadline.guard``) and concurrent forks (``read.forks``), with real
graph runs in two processes on SQLite files, Postgres and Redis.

Runs overlap through marker files (``guard_workers``): a run's node says it is inside the
graph and waits for the files its turn is told to wait for, so "A holds the thread while B
tries" and "A and B both started from the same head" are certain, not a matter of sleeps.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cli_support import cli
from guard_workers import build, run_turn
from threadline import ConfigError, ThreadBusyError, ThreadlineError
from threadline.guard import acurrent_lease, current_lease, guarded, thread_lease
from threadline.lifecycle import fsck
from threadline.read import thread_history
from threadline.storage import schema
from threadline.storage.ops import delete_thread
from threadline.web.layout import lay_out
from threadline.web.queries import tree_op

KINDS = ("sqlite", "postgres", "redis")
# Children fork from a server process that imported LangGraph and threadline once (and holds
# no threads or connections), instead of each importing them again: the runs start fast.
SPAWN = multiprocessing.get_context("forkserver")
SPAWN.set_forkserver_preload(["guard_workers"])
CFG = {"configurable": {"thread_id": "chat"}}


def wait_file(path: Path, proc: Any = None, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while not path.exists():
        assert proc is None or proc.is_alive() or path.exists(), f"the worker died before {path.name}"
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.01)


def start_turn(url: str, turn: str, tmp: Path, wait_for: dict, guard: dict | None) -> Any:
    p = SPAWN.Process(target=run_turn, args=(url, "chat", turn, str(tmp), wait_for, guard, str(tmp / f"{turn}.json")))
    p.start()
    return p


def head_messages(saver: Any) -> list[str]:
    return saver.get_tuple(CFG).checkpoint["channel_values"]["messages"]


@pytest.fixture(params=KINDS)
def db(request: pytest.FixtureRequest, fresh_backend: Any, tmp_path: Path) -> Any:
    """A fresh database of each kind, its saver open, with one finished turn ("hello") on the thread."""
    backend = fresh_backend(request.param)
    with backend.open() as saver:
        build(str(tmp_path), {}).compile(checkpointer=saver).invoke({"messages": ["hello"]}, CFG)
        yield backend, saver


def test_guard_rejects_then_enqueues_and_no_turn_is_lost(db: Any, tmp_path: Path) -> None:
    backend, saver = db
    guard = {"lease_seconds": 5}
    # A (another process) holds the thread: its node waits for "go"
    a = start_turn(backend.url, "A", tmp_path, {"A": ["go"]}, guard)
    try:
        wait_file(tmp_path / "A.in", a)
        app = build(str(tmp_path), {}).compile(checkpointer=saver)
        with pytest.raises(ThreadBusyError) as busy:
            guarded(app, **guard).invoke({"messages": ["B"]}, CFG)
        holder = current_lease(saver, "chat").holder
        assert busy.value.thread_id == "chat" and busy.value.holder == holder and f":{a.pid}:" in holder
        assert "'chat' is busy" in str(busy.value) and "multitask_strategy='enqueue'" in str(busy.value)
        assert busy.value.remaining is not None and 0 < busy.value.remaining <= 5
        # B again, waiting its turn: A goes on once B is waiting, and B runs on A's result
        threading.Timer(0.3, (tmp_path / "go").touch).start()
        out = guarded(app, multitask_strategy="enqueue", timeout=30, **guard).invoke({"messages": ["B"]}, CFG)
        a.join(30)
    finally:
        a.kill()
    assert json.loads((tmp_path / "A.json").read_text()) == {"ok": ["hello", "reply to hello", "A", "reply to A"]}
    assert out["messages"] == head_messages(saver) == ["hello", "reply to hello", "A", "reply to A", "B", "reply to B"]
    assert current_lease(saver, "chat") is None  # both released
    report = fsck(saver)
    assert report.ok and report.findings == []
    assert thread_history(saver, "chat").fork_points == []


def test_without_the_guard_fsck_history_and_the_ui_name_the_concurrent_fork(db: Any, tmp_path: Path) -> None:
    backend, saver = db
    # A and B each wait for the other to be inside the graph: both started from the same head
    wait_for = {"A": ["B.in"], "B": ["A.in"]}
    a = start_turn(backend.url, "A", tmp_path, wait_for, None)
    try:
        out = build(str(tmp_path), wait_for).compile(checkpointer=saver).invoke({"messages": ["B"]}, CFG)
        a.join(30)
    finally:
        a.kill()
    assert json.loads((tmp_path / "A.json").read_text())["ok"][-1] == "reply to A"
    assert out["messages"][-1] == "reply to B"
    head = head_messages(saver)
    assert head[:2] == ["hello", "reply to hello"] and not {"reply to A", "reply to B"} <= set(head)  # a reply is lost

    report = fsck(saver)
    (finding,) = report.findings
    assert finding.kind == "concurrent_fork" and finding.notice and not finding.repairable
    assert report.ok  # a notice: the rows are sound
    assert "two runs overlapped" in finding.detail and "is off the head" in finding.detail
    assert report.to_json()["findings"][0]["notice"] is True

    history = thread_history(saver, "chat")
    (fork,) = history.concurrent_forks
    assert fork.checkpoint_id == finding.checkpoint_id and fork.fork_point in history.fork_points
    assert history.nodes[""][fork.checkpoint_id].concurrent_with == fork.overlaps
    assert history.to_json()["concurrent_forks"][0]["detail"] == finding.detail

    if backend.kind == "sqlite":  # the commands, once: fsck passes with the notice, history marks the checkpoint
        checked = cli("fsck", "--db", backend.url, columns=200)
        assert checked.returncode == 0 and "concurrent_fork" in checked.stdout and "notice" in checked.stdout
        shown = cli("history", "chat", "--db", backend.url, columns=200)
        assert shown.returncode == 0 and "concurrent run: overlaps" in shown.stdout and "concurrent fork at" in shown.stdout

    layout = lay_out(saver.run(tree_op(saver.dialect, "chat")))
    marked = [n for n in layout["nodes"] if "concurrent" in n]
    assert [n["id"] for n in marked] == [fork.checkpoint_id]
    assert layout["nodes"][marked[0]["concurrent"]]["id"] == fork.overlaps
    assert layout["concurrent_forks"] == [finding.detail]


def test_kill_9_of_the_holder_frees_the_thread_within_its_lease(db: Any, tmp_path: Path) -> None:
    backend, saver = db
    lease = 1.0
    a = start_turn(backend.url, "A", tmp_path, {"A": ["never"]}, {"lease_seconds": lease})
    try:
        wait_file(tmp_path / "A.in", a)
        assert f":{a.pid}:" in current_lease(saver, "chat").holder
        os.kill(a.pid, signal.SIGKILL)
        a.join(10)
        killed = time.monotonic()
        with thread_lease(saver, CFG, multitask_strategy="enqueue", timeout=lease + 10, lease_seconds=lease) as mine:
            freed = time.monotonic() - killed
            assert current_lease(saver, "chat").holder == mine.holder
    finally:
        a.kill()
    assert freed < lease + 5  # within the lease (and a generous margin for a loaded machine)
    assert current_lease(saver, "chat") is None


def test_the_lease_is_renewed_while_the_run_lasts(db: Any, tmp_path: Path) -> None:
    _, saver = db
    with thread_lease(saver, CFG, lease_seconds=0.6) as held:
        time.sleep(1.5)  # more than twice the lease: only renewals keep it
        assert current_lease(saver, "chat").holder == held.holder and not held.lost
        with pytest.raises(ThreadBusyError):
            with thread_lease(saver, CFG, lease_seconds=0.6):
                pass
    assert current_lease(saver, "chat") is None


def test_deleting_the_thread_drops_its_lease(db: Any) -> None:
    _, saver = db
    with thread_lease(saver, CFG, lease_seconds=30):
        saver.run(delete_thread(saver.dialect, "chat"), write=True)
        assert current_lease(saver, "chat") is None


@pytest.mark.parametrize("kind", KINDS)
def test_time_travel_still_forks_and_is_not_reported_as_concurrent(kind: str, fresh_backend: Any, tmp_path: Path) -> None:
    backend = fresh_backend(kind)
    with backend.open() as saver:
        app = guarded(build(str(tmp_path), {}).compile(checkpointer=saver))
        for turn in ("one", "two"):
            app.invoke({"messages": [turn]}, CFG)
        past = next(s for s in app.get_state_history(CFG) if s.values.get("messages") == ["one", "reply to one"] and not s.next)
        app.invoke({"messages": ["again"]}, past.config)  # a run from a named past checkpoint
        app.update_state(past.config, {"messages": ["edited"]})  # update_state on an old checkpoint
        history = thread_history(saver, "chat")
        assert history.fork_points == [past.config["configurable"]["checkpoint_id"]]
        assert len(history.nodes[""][history.fork_points[0]].children) == 3
        assert history.concurrent_forks == []
        assert [f.kind for f in fsck(saver).findings] == []


async def test_async_lease_rejects_a_second_run(fresh_backend: Any) -> None:
    backend = fresh_backend("sqlite-async")
    async with backend.open() as saver:
        async with thread_lease(saver, CFG, lease_seconds=5) as held:
            assert (await acurrent_lease(saver, "chat")).holder == held.holder
            with pytest.raises(ThreadBusyError, match="'chat' is busy"):
                async with thread_lease(saver, CFG):
                    pass
        assert await acurrent_lease(saver, "chat") is None


def test_stream_holds_the_lease_while_it_is_iterated(tmp_path: Path) -> None:
    from threadline import SqliteSaver

    with SqliteSaver.from_conn_string(str(tmp_path / "t.db")) as saver:
        app = guarded(build(str(tmp_path), {}).compile(checkpointer=saver))
        holders = [current_lease(saver, "chat") for _ in app.stream({"messages": ["x"]}, CFG)]
        assert holders and all(h is not None for h in holders)
        assert current_lease(saver, "chat") is None and head_messages(saver) == ["x", "reply to x"]


async def test_ainvoke_and_astream_hold_the_lease(fresh_backend: Any, tmp_path: Path) -> None:
    backend = fresh_backend("postgres-async")
    async with backend.open() as saver:
        app = guarded(build(str(tmp_path), {}).compile(checkpointer=saver))
        async for _ in app.astream({"messages": ["x"]}, CFG):
            held = await acurrent_lease(saver, "chat")
            assert held is not None
            with pytest.raises(ThreadBusyError, match=re.escape(f"run '{held.holder}' holds it")):
                await app.ainvoke({"messages": ["y"]}, CFG)
        out = await app.ainvoke({"messages": ["y"]}, CFG)
        assert out["messages"] == ["x", "reply to x", "y", "reply to y"]
        assert await acurrent_lease(saver, "chat") is None


@pytest.mark.parametrize("kwargs", [
    {"lease_seconds": 0}, {"lease_seconds": -1}, {"lease_seconds": float("nan")}, {"lease_seconds": True}, {"lease_seconds": "5"},
    {"timeout": -1}, {"multitask_strategy": "interrupt"}, {"multitask_strategy": "rollback"}, {"holder": "a\x00b"},
])
def test_bad_options_are_one_clear_error(kwargs: dict, tmp_path: Path) -> None:
    from threadline import SqliteSaver

    with SqliteSaver.from_conn_string(str(tmp_path / "t.db")) as saver:
        with pytest.raises(ConfigError) as err:
            thread_lease(saver, CFG, **kwargs)
        assert isinstance(err.value, ThreadlineError) and "\n" not in str(err.value)


def test_bad_configs_and_savers_are_one_clear_error(tmp_path: Path) -> None:
    from threadline import SqliteSaver

    with SqliteSaver.from_conn_string(str(tmp_path / "t.db")) as saver:
        for config in ({"configurable": {}}, {}, None, {"configurable": {"thread_id": ""}}):
            with pytest.raises(ConfigError, match="thread_id|configurable"):
                thread_lease(saver, config)
        app = guarded(build(str(tmp_path), {}).compile(checkpointer=saver))
        with pytest.raises(ConfigError, match="thread_id"):
            app.invoke({"messages": ["x"]}, {"configurable": {}})
    with pytest.raises(ConfigError, match="no checkpointer"):
        guarded(build(str(tmp_path), {}).compile())
    with pytest.raises(ConfigError, match="threadline saver"):
        thread_lease(object(), CFG)


def test_migration_8_applies_without_7_and_a_later_7_still_applies(tmp_path: Path) -> None:
    from threadline import SqliteSaver

    with SqliteSaver.from_conn_string(str(tmp_path / "t.db")) as saver:
        saver.setup()
        applied = {r[0] for r in saver.run(_applied(saver.dialect))}
        assert 8 in applied and schema.LATEST_VERSION == max(v for v, _ in schema.MIGRATIONS)
    later = (7, ["CREATE TABLE IF NOT EXISTS threadline_probe7 (x {int})"])
    missing = 7 not in {v for v, _ in schema.MIGRATIONS}
    if missing:  # a release that adds 7 after a database got 8
        schema.MIGRATIONS.append(later)
    try:
        with SqliteSaver.from_conn_string(str(tmp_path / "t.db")) as saver:
            saver.setup()
            assert {7, 8} <= {r[0] for r in saver.run(_applied(saver.dialect))}
    finally:
        if missing:
            schema.MIGRATIONS.remove(later)


def _applied(d: Any) -> Any:
    from threadline.storage.ops import Q

    return (yield Q(d.APPLIED_MIGRATIONS))


def test_the_lease_on_redis_cluster(fresh_backend: Any) -> None:
    """The lease key shares the thread's hash tag: one slot with the thread's keys (delete_thread's DEL)."""
    backend = fresh_backend("redis-cluster")
    with backend.open() as saver:
        with thread_lease(saver, CFG, lease_seconds=30) as held:
            assert current_lease(saver, "chat").holder == held.holder
            with pytest.raises(ThreadBusyError):
                with thread_lease(saver, CFG):
                    pass
            saver.run(delete_thread(saver.dialect, "chat"), write=True)
            assert current_lease(saver, "chat") is None


def test_a_held_thread_is_busy_in_its_status_the_search_and_the_listing(db: Any) -> None:
    """A thread whose lease a run holds is ``busy`` (the Agent Server's status) for every reader:
    ``read.thread_status``, ``search_threads(status=…)``, the listing with statuses, the browser's
    status; an ``idle`` search leaves it out. Released, it is ``idle`` again."""
    from web_helpers import client

    from threadline import read
    from threadline.web import UIConfig
    from threadline.web.queries import thread_status_op

    backend, saver = db
    tid = CFG["configurable"]["thread_id"]
    assert read.thread_status(saver, tid).status == "idle"
    with thread_lease(saver, CFG, lease_seconds=30):
        assert read.thread_status(saver, tid).status == "busy"
        assert saver.run(thread_status_op(saver.dialect, saver.serde, tid, saver.get_tuple(CFG).config["configurable"]["checkpoint_id"], saver.blob_codec)).kind == "busy"
        assert [t.thread_id for t in read.search_threads(saver, status="busy")] == [tid]
        assert read.search_threads(saver, status="idle") == []
        assert read.count_threads(saver, status="busy") == 1
        page = read.list_threads(saver, with_status=True)
        assert [(t.thread_id, t.status.status) for t in page.threads] == [(tid, "busy")]
        assert read.thread_status(saver, tid, busy=lambda t: False).status == "idle"  # a caller's own check wins
        with client(UIConfig(db=backend.url)) as c:  # the browser's threads page
            assert 'data-status="busy"' in c.get("/").text
    assert read.thread_status(saver, tid).status == "idle"
    assert [t.thread_id for t in read.search_threads(saver, status="idle")] == [tid]
    assert read.search_threads(saver, status="busy") == []
