"""Issue 29: thread status, thread records, the threads search and ``list(filter=…)`` operators,
on SQLite, Postgres and Redis, with real LangGraph graphs (one that calls ``interrupt()``, one
whose node raises, one stopped before a node, one that finishes)."""

from __future__ import annotations

import json
import operator
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from typer.testing import CliRunner

from backends import make_backend
from threadline import lifecycle, read
from threadline.cli import app
from threadline.errors import ConfigError, FilterError

KINDS = ("sqlite", "postgres", "redis")


class State(TypedDict, total=False):
    topic: str
    answer: str
    n: int


def _ask(state: State) -> State:
    return {"answer": interrupt({"question": f"about {state['topic']}?"})}


def _boom(state: State) -> State:
    raise RuntimeError("model timed out")


def _write(state: State) -> State:
    return {"answer": f"done {state['topic']}", "n": len(state["topic"])}


def _graph(saver: Any, node: Any, **kw: Any) -> Any:
    g = StateGraph(State)
    g.add_node("work", node)
    g.add_edge(START, "work")
    g.add_edge("work", END)
    return g.compile(checkpointer=saver, **kw)


def _cfg(tid: str, **meta: Any) -> dict:
    return {"configurable": {"thread_id": tid}, "metadata": meta}


def populate(saver: Any) -> None:
    """Four threads, one of each status: t-done, t-ask (interrupted), t-boom (errored), t-wait (pending)."""
    _graph(saver, _write).invoke({"topic": "cats"}, _cfg("t-done", owner="ada", step_hint=1))
    _graph(saver, _ask).invoke({"topic": "dogs"}, _cfg("t-ask", owner="ada"))
    with pytest.raises(RuntimeError):
        _graph(saver, _boom).invoke({"topic": "fish"}, _cfg("t-boom", owner="bob"))
    _graph(saver, _write, interrupt_before=["work"]).invoke({"topic": "owls"}, _cfg("t-wait", owner="ada"))


@pytest.fixture(params=KINDS)
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    backend = make_backend(request.param, tmp_path, request)
    with backend.open() as s:
        populate(s)
        yield s


def ids(threads: Any) -> list[str]:
    return sorted(t.thread_id for t in threads)


def test_status_of_each_state(saver: Any) -> None:
    got = {t: read.thread_status(saver, t) for t in ("t-done", "t-ask", "t-boom", "t-wait", "t-none")}
    assert {t: (s.kind, s.status) for t, s in got.items()} == {
        "t-done": ("done", "idle"), "t-ask": ("interrupted", "interrupted"), "t-boom": ("errored", "error"),
        "t-wait": ("pending", "idle"), "t-none": ("new", "idle"),
    }
    assert got["t-ask"].interrupts[0]["value"] == {"question": "about dogs?"} and got["t-ask"].interrupts[0]["node"] == "work"
    assert got["t-ask"].interrupts[0]["id"]
    assert "model timed out" in str(got["t-boom"].errors[0])
    assert got["t-wait"].next == ["work"] and got["t-done"].next == []
    assert read.thread_status(saver, "t-done", busy=lambda t: t == "t-done").status == "busy"
    assert read.thread_status(saver, "t-done").to_json()["status"] == "idle"


def test_records_set_get_archive_and_delete(saver: Any) -> None:
    assert read.thread_record(saver, "t-done").metadata == {}
    rec = lifecycle.update_thread(saver, "t-done", {"title": "Cats", "owner": "ada", "tags": ["pets"], "prio": 3})
    assert rec.metadata == {"title": "Cats", "owner": "ada", "tags": ["pets"], "prio": 3} and not rec.archived
    rec = lifecycle.update_thread(saver, "t-done", {"title": None, "prio": 4})  # merged; None removes
    assert read.thread_record(saver, "t-done").metadata == {"owner": "ada", "tags": ["pets"], "prio": 4}
    checkpoints = len(list(saver.list(_cfg("t-done"))))
    lifecycle.update_thread(saver, "t-boom", archived=True)
    assert len(list(saver.list(_cfg("t-done")))) == checkpoints  # no checkpoint written
    assert "t-boom" not in ids(read.list_threads(saver).threads)
    assert ids(read.list_threads(saver, archived=True).threads) == ["t-boom"]
    assert "t-boom" in ids(read.list_threads(saver, archived=None).threads)
    assert ids(read.list_threads(saver, thread_ids=["t-boom"]).threads) == ["t-boom"]  # asked for by id: found
    assert read.count_threads(saver) == 3 and read.count_threads(saver, archived=None) == 4
    lifecycle.update_thread(saver, "t-done", {"x": 1}, replace=True)
    assert read.thread_record(saver, "t-done").metadata == {"x": 1}
    saver.delete_thread("t-done")
    assert read.thread_record(saver, "t-done").metadata == {} and read.thread_record(saver, "t-done").created_at is None
    with pytest.raises(ConfigError):
        lifecycle.update_thread(saver, "t-ask", {"bad": float("nan")})
    with pytest.raises(ConfigError):
        lifecycle.update_thread(saver, "t-ask", ["not", "a", "mapping"])  # type: ignore[arg-type]


def _records(saver: Any) -> None:
    lifecycle.update_thread(saver, "t-done", {"owner": "ada", "prio": 1, "user": {"level": "gold"}, "tag": "a"})
    lifecycle.update_thread(saver, "t-ask", {"owner": "ada", "prio": 5, "user": {"level": "silver"}})
    lifecycle.update_thread(saver, "t-boom", {"owner": "bob", "prio": 9, "user": {"level": "gold"}})
    # t-wait: no record ({})


@pytest.mark.parametrize("filter, expected", [
    ({"owner": "ada"}, ["t-ask", "t-done"]),
    ({"owner": {"$eq": "bob"}}, ["t-boom"]),
    ({"owner": {"$ne": "ada"}}, ["t-boom"]),
    ({"prio": {"$gt": 1}}, ["t-ask", "t-boom"]),
    ({"prio": {"$gte": 5, "$lt": 9}}, ["t-ask"]),
    ({"prio": {"$lte": 1}}, ["t-done"]),
    ({"owner": {"$in": ["bob", "eve"]}}, ["t-boom"]),
    ({"owner": {"$nin": ["bob"]}}, ["t-ask", "t-done"]),
    ({"user.level": "gold"}, ["t-boom", "t-done"]),
    ({"user.level": {"$in": ["silver"]}}, ["t-ask"]),
    ({"tag": None}, ["t-ask", "t-boom", "t-wait"]),
    ({"owner": "ada", "prio": {"$gt": 2}}, ["t-ask"]),
])
def test_search_by_record_metadata(saver: Any, filter: dict, expected: list[str]) -> None:
    _records(saver)
    assert ids(read.search_threads(saver, metadata=filter, limit=50)) == expected
    assert read.count_threads(saver, metadata=filter) == len(expected)


def test_search_by_status_values_paging_and_sort(saver: Any) -> None:
    _records(saver)
    assert ids(read.search_threads(saver, status="interrupted")) == ["t-ask"]
    assert ids(read.search_threads(saver, ids=["t-ask", "t-done"], status="idle")) == ["t-done"]
    assert ids(read.search_threads(saver, status="error")) == ["t-boom"]
    assert ids(read.search_threads(saver, status="errored")) == ["t-boom"]
    assert ids(read.search_threads(saver, status="idle")) == ["t-done", "t-wait"]
    assert ids(read.search_threads(saver, status="done")) == ["t-done"]
    assert ids(read.search_threads(saver, status="pending")) == ["t-wait"]
    assert read.search_threads(saver, status="busy") == []
    assert ids(read.search_threads(saver, status="busy", busy=lambda t: t == "t-ask")) == ["t-ask"]
    assert read.count_threads(saver, status="interrupted", metadata={"owner": "ada"}) == 1
    found = read.search_threads(saver, status="interrupted")
    assert found[0].status.interrupts[0]["value"] == {"question": "about dogs?"} and found[0].metadata["owner"] == "ada"
    assert ids(read.search_threads(saver, values={"topic": "cats"})) == ["t-done"]
    assert ids(read.search_threads(saver, values={"n": {"$gte": 4}})) == ["t-done"]
    assert ids(read.search_threads(saver, values={"answer": {"$in": ["done cats", "x"]}})) == ["t-done"]
    assert read.search_threads(saver, values={"missing": 1}) == []
    assert read.count_threads(saver, values={"topic": {"$in": ["cats", "owls"]}}) == 2
    by_created = [t.thread_id for t in read.search_threads(saver, sort_by="created_at", sort_order="asc", limit=10)]
    assert by_created == ["t-done", "t-ask", "t-boom", "t-wait"]
    newest = [t.thread_id for t in read.search_threads(saver, sort_by="created_at", sort_order="desc", limit=10)]
    assert newest == by_created[::-1]
    pages = [[t.thread_id for t in read.search_threads(saver, sort_by="thread_id", sort_order="asc", limit=3, offset=o)] for o in (0, 3)]
    assert pages == [["t-ask", "t-boom", "t-done"], ["t-wait"]]
    assert [t.thread_id for t in read.search_threads(saver, sort_by="thread_id", sort_order="desc", limit=2)] == ["t-wait", "t-done"]
    assert [t.thread_id for t in read.search_threads(saver, status="idle", sort_by="thread_id", sort_order="asc", limit=1, offset=1)] == ["t-wait"]
    with pytest.raises(ValueError, match="sort_by"):
        read.search_threads(saver, sort_by="bytes")
    with pytest.raises(ValueError, match="status must be one of"):
        read.search_threads(saver, status="sleeping")
    with pytest.raises(FilterError, match=r"\$regex"):
        read.search_threads(saver, metadata={"owner": {"$regex": "a"}})


def test_list_filter_operators(saver: Any) -> None:
    def listed(filter: dict) -> list[str]:
        return sorted({c.config["configurable"]["thread_id"] for c in saver.list(None, filter=filter)})

    assert listed({"step": {"$gt": 0}}) == ["t-done"]  # the finished run's last checkpoint: step 1
    assert listed({"step": {"$gte": -1, "$lte": -1}}) == ["t-ask", "t-boom", "t-done", "t-wait"]
    assert listed({"owner": {"$in": ["bob"]}, "step": {"$eq": 0}}) == ["t-boom"]
    assert listed({"owner": {"$nin": ["ada"]}}) == ["t-boom"]
    assert listed({"owner": {"$ne": "ada"}, "source": "input"}) == ["t-boom"]
    assert listed({"owner": "ada", "step": {"$lt": 0}}) == ["t-ask", "t-done", "t-wait"]  # plain keys as before
    with pytest.raises(FilterError, match=r"\$regex"):
        list(saver.list(None, filter={"step": {"$regex": "1"}}))
    with pytest.raises(FilterError, match="needs a list"):
        list(saver.list(None, filter={"step": {"$in": 3}}))
    assert ids(read.list_threads(saver, metadata={"step": {"$gt": 0}}).threads) == ["t-done"]


@pytest.mark.parametrize("key", ["o'wner", 'o"wner', "owner') OR 1=1 --", "x; DROP TABLE threadline_threads", "a\\b"])
def test_hostile_filters_are_bound(saver: Any, key: str) -> None:
    lifecycle.update_thread(saver, "t-done", {key: "v'); DROP TABLE x; --"})
    assert ids(read.search_threads(saver, metadata={key: "v'); DROP TABLE x; --"})) == ["t-done"]
    assert ids(read.search_threads(saver, metadata={key: {"$in": ["' OR '1'='1"]}})) == []
    assert list(saver.list(None, filter={key: {"$gt": "' OR 1=1 --"}})) == []
    assert read.count_threads(saver, archived=None) == 4  # nothing dropped


def test_cli_threads_status_where_json(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    backend = make_backend("sqlite", tmp_path, request)
    with backend.open() as s:
        populate(s)
        lifecycle.update_thread(s, "t-done", {"title": "Cats"})
    runner = CliRunner()
    res = runner.invoke(app, ["threads", "--db", backend.url, "--status", "interrupted", "--where", "owner=ada", "--json"])
    assert res.exit_code == 0, res.output
    page = json.loads(res.stdout)
    assert [t["thread_id"] for t in page["threads"]] == ["t-ask"] and page["total"] == 1
    assert page["threads"][0]["status"]["status"] == "interrupted"
    assert page["threads"][0]["status"]["interrupts"][0]["value"] == {"question": "about dogs?"}
    res = runner.invoke(app, ["thread-set", "t-boom", "owner=ada", "prio=7", "--archive", "--db", backend.url])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["threads", "--db", backend.url, "--meta", 'prio={"$gt": 5}', "--json"])
    assert json.loads(res.stdout)["threads"] == []  # archived: hidden
    res = runner.invoke(app, ["threads", "--db", backend.url, "--meta", 'prio={"$gt": 5}', "--archived", "--json"])
    found = json.loads(res.stdout)["threads"]
    assert [t["thread_id"] for t in found] == ["t-boom"] and found[0]["archived"] and found[0]["metadata"]["prio"] == 7
    res = runner.invoke(app, ["threads", "--db", backend.url])
    assert res.exit_code == 0 and "interrupted" in res.stdout and "Cats" in res.stdout
    res = runner.invoke(app, ["threads", "--db", backend.url, "--status", "sleepy"])
    assert res.exit_code == 2


@pytest.mark.parametrize("kind", KINDS)
def test_records_go_through_backup_and_restore(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    from threadline.backends import open_saver
    from threadline.transfer import backup

    source = make_backend(kind, tmp_path, request)
    with source.open() as s:
        _graph(s, _write).invoke({"topic": "cats"}, _cfg("t1"))
        lifecycle.update_thread(s, "t1", {"title": "Cats", "n": 2}, archived=True)
        report = backup.backup(s, str(tmp_path / "bk.db"))
    assert report.rows.get("thread_records") == 1
    target = make_backend(kind, tmp_path / "target", request) if kind != "sqlite" else None
    (tmp_path / "target").mkdir(exist_ok=True)
    with (target.open() if target else open_saver(str(tmp_path / "target" / "b.db"))) as d:
        result = backup.restore(d, str(tmp_path / "bk.db"), replace=True)
        assert result.ok, result
        rec = read.thread_record(d, "t1")
        assert rec.metadata == {"title": "Cats", "n": 2} and rec.archived


def test_a_database_from_before_migration_7(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """The CLI's reads name the one fix for an older database (they never migrate); setup adds the records."""
    import sqlite3

    backend = make_backend("sqlite", tmp_path, request)
    with backend.open() as s:
        _graph(s, _write).invoke({"topic": "cats"}, _cfg("t-old"))
    con = sqlite3.connect(backend.url)
    con.execute("DROP TABLE threadline_thread_records")
    con.execute("DELETE FROM threadline_migrations WHERE v = 7")
    con.commit()
    con.close()
    runner = CliRunner()
    res = runner.invoke(app, ["threads", "--db", backend.url, "--json"])
    assert res.exit_code == 2 and "threadline setup" in res.output
    assert runner.invoke(app, ["setup", "--db", backend.url]).exit_code == 0
    assert runner.invoke(app, ["thread-set", "t-old", "owner=ada", "--db", backend.url]).exit_code == 0
    res = runner.invoke(app, ["threads", "--db", backend.url, "--meta", "owner=ada", "--status", "done", "--json"])
    assert res.exit_code == 0 and [t["thread_id"] for t in json.loads(res.stdout)["threads"]] == ["t-old"]


async def test_async_search_and_count(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    backend = make_backend("sqlite-async", tmp_path, request)
    async with backend.open() as s:
        await _graph(s, _write).ainvoke({"topic": "cats"}, _cfg("a-1"))
        await _graph(s, _ask).ainvoke({"topic": "dogs"}, _cfg("a-2"))
        await s.arun(lifecycle.update_thread_op(s.dialect, "a-2", {"owner": "ada"}), write=True)
        found = await read.asearch_threads(s, metadata={"owner": "ada"}, status="interrupted")
        assert [t.thread_id for t in found] == ["a-2"] and found[0].status.interrupts[0]["value"] == {"question": "about dogs?"}
        assert await read.acount_threads(s, status="idle") == 1
