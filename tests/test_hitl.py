"""Humans in the loop (issue 30), library and CLI: the inbox, answering an interrupt, replaying
from a past checkpoint, answered interrupts shown as answered, and bad input as a user gives it —
on SQLite and Postgres, with a real agent whose refund tool waits for approval."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import hitl_agent as A
from cli_support import cli, one_line_error
from threadline import lifecycle, open_saver, read, runs
from threadline.cli import app
from threadline.errors import ConfigError, ThreadBusyError
from threadline.guard import thread_lease

GRAPH = "hitl_agent:build_graph"


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "hitl.db")
    from backends import fresh_postgres_url

    return fresh_postgres_url(request)


def _started(url: str, *threads: str) -> None:
    with open_saver(url) as saver:
        for i, tid in enumerate(threads):
            A.start(saver, tid)
            lifecycle.update_thread(saver, tid, {"owner": "ada", "n": i})


def _tl(*args: str):
    return CliRunner().invoke(app, list(args))


def test_inbox_resume_answered_and_replay(url: str) -> None:
    _started(url, "refund-1", "refund-2")
    r = _tl("inbox", "--db", url, "--json")
    assert r.exit_code == 0, r.output
    items = json.loads(r.output)
    assert [i["thread_id"] for i in items] == ["refund-1", "refund-2"]  # oldest first
    first = items[0]
    assert first["node"] == "tools" and first["value"]["tool"] == "refund" and first["value"]["args"] == {"order": 7, "amount": 42}
    assert first["metadata"] == {"owner": "ada", "n": 0} and first["waited"] >= 0 and first["interrupt_id"]

    r = _tl("resume", "refund-1", "--value", '{"approved": true}', "--graph", GRAPH, "--db", url)
    assert r.exit_code == 0, r.output
    assert "tool [call-1]: refunded 42 on order 7" in r.output and "ai: Done: refunded 42 on order 7" in r.output
    assert "now done" in r.output

    with open_saver(url) as saver:
        assert [i.thread_id for i in read.inbox(saver)] == ["refund-2"]
        assert read.inbox_count(saver) == 1
        history = list(A.build_graph().copy({"checkpointer": saver}).get_state_history({"configurable": {"thread_id": "refund-1"}}))
        asked = next(h for h in history if h.next == ("tools",))
        view = read.state_at(saver, "refund-1", asked.config["configurable"]["checkpoint_id"])
        assert view.interrupts == [] and view.answered[0]["answer"] == {"approved": True}
        assert view.answered[0]["value"]["tool"] == "refund"
        assert read.thread_status(saver, "refund-1").kind == "done"

    r = _tl("replay", "refund-1", "HEAD~3", "--graph", GRAPH, "--db", url, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert [e["node"] for e in out["events"]] == ["agent", "__interrupt__"] and out["status"]["kind"] == "interrupted"
    with open_saver(url) as saver:
        tree = read.thread_history(saver, "refund-1")
        assert len(tree.fork_points) == 1  # the replay forked a branch
        assert sorted(i.thread_id for i in read.inbox(saver)) == ["refund-1", "refund-2"]


def test_library_runs_stream_and_refuse(tmp_path: Path) -> None:
    url = str(tmp_path / "lib.db")
    _started(url, "t")
    seen: list[str] = []
    with open_saver(url) as saver:
        with pytest.raises(ConfigError, match="does not wait on interrupt 'nope'"):
            runs.resume(A.build_graph(), saver, "t", True, interrupt_id="nope")
        with thread_lease(saver, {"configurable": {"thread_id": "t"}}):  # another run holds the thread
            with pytest.raises(ThreadBusyError, match="'t'"):
                runs.resume(A.build_graph(), saver, "t", True)
        wanted = read.inbox(saver)[0].interrupt_id
        result = runs.resume(A.builder(), saver, "t", {"approved": False}, interrupt_id=wanted, on_event=lambda e: seen.append(e.node))
        assert seen == ["tools", "agent"] and result.status.kind == "done"
        assert result.events[0].update["messages"][0]["content"] == "refund rejected by a person"
        with pytest.raises(ConfigError, match="not waiting on an interrupt"):
            runs.resume(A.build_graph(), saver, "t", True)
        head = saver.get_tuple({"configurable": {"thread_id": "t"}}).config["configurable"]["checkpoint_id"]
        edited = runs.edit_and_run(A.build_graph(), saver, "t", head, {"messages": [("user", "and order 8?")]}, as_node="tools")
        assert [e.node for e in edited.events] == ["agent", "__interrupt__"]
        with pytest.raises(ConfigError, match="--graph"):
            runs.replay(None, saver, "t", head)


def test_bad_input_one_line_each(tmp_path: Path) -> None:
    url = str(tmp_path / "bad.db")
    _started(url, "w")
    for args, fragment in [
        (["resume", "w", "--value", "{oops", "--graph", GRAPH], "not valid JSON"),
        (["resume", "w", "--value", "true"], "--graph MODULE:FACTORY"),
        (["replay", "w", "HEAD", ], "--graph MODULE:FACTORY"),
        (["resume", "w", "--value", "true", "--graph", "hitl_agent:broken"], "OPENAI_API_KEY is not set"),
        (["resume", "w", "--value", "true", "--graph", "no_such_module:g"], "cannot import module"),
        (["resume", "nobody", "--value", "true", "--graph", GRAPH], "not waiting on an interrupt"),
    ]:
        r = _tl(*args, "--db", url)
        assert r.exit_code == 2, (args, r.output)
        assert fragment in r.output and "Traceback" not in r.output, (args, r.output)


def test_cli_end_to_end_subprocess(tmp_path: Path) -> None:
    url = str(tmp_path / "e2e.db")
    _started(url, "p-1")
    p = cli("inbox", "--db", url)
    assert p.returncode == 0 and "p-1" in p.stdout and "refund" in p.stdout, p.stderr
    p = cli("resume", "p-1", "--value", '{"approved": true}', "--graph", GRAPH, "--db", url)
    assert p.returncode == 0, p.stderr
    assert "refunded 42 on order 7" in p.stdout and "now done" in p.stdout
    one_line_error(cli("resume", "p-1", "--value", "true", "--graph", GRAPH, "--db", url), 2, "not waiting on an interrupt")
    p = cli("replay", "p-1", "HEAD~3", "--graph", GRAPH, "--db", url)
    assert p.returncode == 0 and "interrupt" in p.stdout, p.stderr
    assert "no thread is waiting" not in cli("inbox", "--db", url).stdout
