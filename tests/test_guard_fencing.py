"""Fencing of the thread guard (``threadline.guard``): a run whose lease was lost — its process
paused past the lease while another run took the thread — writes nothing when it wakes
(``LeaseLostError``), on SQLite, Postgres and Redis, with real graph runs in two processes.

The pause is a real one: the holder's process is stopped (SIGSTOP, as a GC pause or a frozen
container stops it: its renewals stop too) and continued once the other run holds the thread.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from guard_workers import build, run_turn
from test_guard import CFG, SPAWN, head_messages, wait_file
from threadline import LeaseLostError
from threadline.guard import current_lease, guarded, thread_lease
from threadline.lifecycle import fsck

CASES = [("sqlite", False), ("postgres", False), ("redis", False), ("postgres", True), ("redis", True)]


def _settled(saver: Any, limit: float = 30.0) -> None:
    """Wait until A's run has stored its step before the node (the node starts meanwhile)."""
    deadline = time.monotonic() + limit
    while not ((head := saver.get_tuple(CFG)).metadata.get("source") == "loop" and head.checkpoint["channel_values"]["messages"][-1] == "A"):
        assert time.monotonic() < deadline, "A's run never stored its step"
        time.sleep(0.01)


def _pause(pid: int, backend: Any) -> None:
    """Stop process ``pid`` at a moment it is not inside a SQLite write transaction (its lease's
    renewal): SQLite has one writer, and a writer stopped mid-transaction blocks every process."""
    while True:
        os.kill(pid, signal.SIGSTOP)
        if backend.kind != "sqlite":
            return
        probe = sqlite3.connect(backend.url, timeout=0, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return
        except sqlite3.OperationalError:
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.01)
        finally:
            probe.close()


def _free(saver: Any, limit: float = 30.0) -> None:
    """Wait until no run holds the thread (the stopped holder's lease ran out)."""
    deadline = time.monotonic() + limit
    while current_lease(saver, "chat") is not None:
        assert time.monotonic() < deadline, "the stopped holder's lease never expired"
        time.sleep(0.05)


def _everything(saver: Any) -> str:
    """Every value of the thread's history, its pending writes included, as text."""
    return repr([(t.checkpoint["channel_values"], t.pending_writes) for t in saver.list(CFG)])


@pytest.mark.parametrize(("kind", "asynchronous"), CASES, ids=[f"{k}{'-async' if a else ''}" for k, a in CASES])
def test_a_holder_paused_past_its_lease_writes_nothing_once_another_run_took_the_thread(
    kind: str, asynchronous: bool, fresh_backend: Any, tmp_path: Path
) -> None:
    backend = fresh_backend(kind)
    with backend.open() as saver:
        app = build(str(tmp_path), {}).compile(checkpointer=saver)
        app.invoke({"messages": ["hello"]}, CFG)
        # A (another process) takes the thread with a 1 s lease; its node waits for "go"
        a = SPAWN.Process(target=run_turn, args=(backend.url, "chat", "A", str(tmp_path), {"A": ["go"]}, {"lease_seconds": 1.0},
                                                 str(tmp_path / "A.json"), asynchronous))
        a.start()
        try:
            wait_file(tmp_path / "A.in", a)
            _settled(saver)
            taken = current_lease(saver, "chat")
            assert f":{a.pid}:" in taken.holder and taken.token >= 1
            _pause(a.pid, backend)  # A pauses: nothing of it runs, nothing renews its lease
            _free(saver)
            # B takes the thread over and runs its turn; A wakes while B still holds it
            with thread_lease(saver, CFG, lease_seconds=30) as b:
                assert b.state.token == taken.token + 1
                out = app.invoke({"messages": ["B"]}, CFG)
                after_b = backend.stored("chat"), _everything(saver)
                os.kill(a.pid, signal.SIGCONT)
                (tmp_path / "go").touch()
                a.join(30)
                assert a.exitcode == 0
                assert (backend.stored("chat"), _everything(saver)) == after_b  # nothing of A's stored
        finally:
            if a.is_alive():
                os.kill(a.pid, signal.SIGCONT)
            a.kill()
        result = json.loads((tmp_path / "A.json").read_text())
        assert "lost" in result, result  # LeaseLostError, not a reply
        assert result["thread_id"] == "chat" and result["token"] == taken.token
        assert result["holder"] == b.holder and result["holder_token"] == b.state.token
        message = result["lost"]
        assert "thread 'chat'" in message and f"token {taken.token}" in message and "nothing was written" in message
        assert repr(b.holder) in message and f"token {b.state.token}" in message and "lease_seconds" in message
        # B's history is whole: its turn is the head, A's reply is nowhere
        assert out["messages"][-2:] == ["B", "reply to B"] and head_messages(saver) == out["messages"]
        assert "reply to A" not in _everything(saver)
        assert fsck(saver).ok


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis", "redis-cluster"])
def test_renewals_keep_the_token_and_the_runs_puts_go_through(kind: str, fresh_backend: Any, tmp_path: Path) -> None:
    backend = fresh_backend(kind)
    with backend.open() as saver:
        app = guarded(build(str(tmp_path), {"x": ["go"]}).compile(checkpointer=saver), lease_seconds=0.6)
        ran: dict[str, Any] = {}
        run = threading.Thread(target=lambda: ran.update(out=app.invoke({"messages": ["x"]}, CFG)))
        run.start()
        try:
            wait_file(tmp_path / "x.in")
            first = current_lease(saver, "chat")
            time.sleep(1.5)  # more than twice the lease: only renewals keep it
            now = current_lease(saver, "chat")
            assert (now.holder, now.token, now.acquired_at) == (first.holder, first.token, first.acquired_at)
        finally:
            (tmp_path / "go").touch()
            run.join(30)
        assert ran["out"]["messages"] == ["x", "reply to x"] == head_messages(saver)
        assert current_lease(saver, "chat") is None
        with thread_lease(saver, CFG) as again:  # the next run gets the next token, and its puts go through
            assert again.state.token == first.token + 1
            (tmp_path / "y.in").touch()
            assert app.graph.invoke({"messages": ["y"]}, CFG)["messages"][-1] == "reply to y"


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis", "redis-cluster"])
def test_a_run_whose_lease_was_taken_over_cannot_put_a_checkpoint(kind: str, fresh_backend: Any, tmp_path: Path) -> None:
    """Two runs given the same holder string: the second takes the lease over (a new token), so
    the first run's next checkpoint — a ``put``, checked in its statement or script — is refused."""
    backend = fresh_backend(kind)
    with backend.open() as saver, backend.open() as other:
        first = build(str(tmp_path), {}).compile(checkpointer=saver)
        first.invoke({"messages": ["hello"]}, CFG)
        before = backend.stored("chat")
        with thread_lease(saver, CFG, holder="worker-1", lease_seconds=30) as a:
            with thread_lease(other, CFG, holder="worker-1", lease_seconds=30) as b:
                assert b.state.token == a.state.token + 1
                with pytest.raises(LeaseLostError) as lost:
                    first.invoke({"messages": ["A"]}, CFG)
                assert backend.stored("chat") == before  # nothing of A's: not even its input checkpoint
                assert lost.value.token == a.state.token and lost.value.holder_token == b.state.token
                assert "not writing checkpoint" in str(lost.value) and "'worker-1'" in str(lost.value)
                out = build(str(tmp_path), {}).compile(checkpointer=other).invoke({"messages": ["B"]}, CFG)
        assert out["messages"] == ["hello", "reply to hello", "B", "reply to B"] == head_messages(saver)
        assert fsck(saver).ok
