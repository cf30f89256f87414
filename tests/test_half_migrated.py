"""A database half-way from LangGraph's official savers to threadline's, seen whole.

A program switched from the official ``SqliteSaver`` / ``PostgresSaver`` adopts each thread
on first use, so for a while the database holds adopted threads and threads only the
official tables hold — here ``t2`` waits for a human approval at an ``interrupt()``. Issue 31
items 2 and 3:

* ``list(None, …)`` lists every checkpoint of the database (it touches every thread, so it
  adopts them, as ``get_tuple`` adopts the thread it names);
* the CLI's listings and ``show`` / ``history`` / ``diff`` / ``audit`` / ``latest`` see the
  official threads not adopted yet, marked as such — on a database only the official saver
  wrote too — and write nothing (the database is byte-for-byte the same);
* ``threadline ui`` on such a database, without ``--read-only``, lists and shows those
  threads and writes nothing until an action is confirmed; the action adopts the thread.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from backends import Backend
from cli_support import EXE, cli, one_line_error, pg_digest, sqlite_digest
from threadline.demo.agent import compile_graph
from threadline.demo.scenario import TURNS
from test_web_browser import Tab, browser  # noqa: F401 (the module's Chromium fixture)
from threadline.web import UIConfig
from web_helpers import client, loopback_opener, running

APPROVAL = "call_tool"  # the node the demo agent's interrupt() waits in


@contextmanager
def official(url: str, postgres: bool) -> Iterator[Any]:
    if postgres:
        from langgraph.checkpoint.postgres import PostgresSaver as Official
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver as Official
    with Official.from_conn_string(url) as saver:
        saver.setup()
        yield saver


def conf(thread_id: str) -> dict:
    return {"configurable": {"thread_id": thread_id}}


def official_threads(url: str, postgres: bool, *thread_ids: str) -> dict[str, list[str]]:
    """The demo agent run to its approval interrupt on each thread by the official saver;
    returns each thread's checkpoint_ids, newest first."""
    with official(url, postgres) as off:
        graph = compile_graph(off)
        for tid in thread_ids:
            for text in TURNS:
                graph.invoke({"messages": [("user", text)]}, conf(tid))
        return {tid: [t.config["configurable"]["checkpoint_id"] for t in off.list(conf(tid))] for tid in thread_ids}


def half_migrated(b: Backend) -> dict[str, list[str]]:
    """t1 adopted by threadline (a program read it), t2 and t3 only in the official tables."""
    ids = official_threads(b.url, b.is_postgres, "t1", "t2", "t3")
    with b.open() as tl:
        assert tl.get_tuple(conf("t1")) is not None
    return ids


def digest(b: Backend) -> str:
    return pg_digest(b.url) if b.is_postgres else sqlite_digest(b.url)


# --- list(None, …) ------------------------------------------------------------------------


def test_list_none_sees_every_thread(sync_backend: Backend) -> None:
    b = sync_backend
    ids = half_migrated(b)
    with official(b.url, b.is_postgres) as off:
        expected = {(t.config["configurable"]["thread_id"], t.config["configurable"]["checkpoint_id"]) for t in off.list(None)}
    assert {tid for tid, _ in expected} == {"t1", "t2", "t3"}
    with b.open() as tl:
        found = {(t.config["configurable"]["thread_id"], t.config["configurable"]["checkpoint_id"]) for t in tl.list(None)}
        assert found == expected
        assert [t.config["configurable"]["checkpoint_id"] for t in tl.list(None, filter={"step": 8})] != []
        assert compile_graph(tl).get_state(conf("t2")).next == (APPROVAL,)
    assert {r[0] for r in b.sql("SELECT thread_id FROM threadline_adopted")} == {"t1", "t2", "t3"}
    assert ids["t2"][0] in {cid for _, cid in found}


async def test_alist_none_sees_every_thread(sync_backend: Backend) -> None:
    b = sync_backend
    half_migrated(b)
    async with b.open(is_async=True) as tl:
        await tl.setup()
        threads = {t.config["configurable"]["thread_id"] async for t in tl.alist(None)}
    assert threads == {"t1", "t2", "t3"}


def test_list_none_with_adopt_false_serves_threadline_tables_only(sync_backend: Backend) -> None:
    b = sync_backend
    half_migrated(b)
    with b.open(adopt=False) as tl:
        assert {t.config["configurable"]["thread_id"] for t in tl.list(None)} == {"t1"}


# --- the CLI --------------------------------------------------------------------------------


def test_cli_reads_see_the_whole_database_and_write_nothing(sync_backend: Backend) -> None:
    b = sync_backend
    ids = half_migrated(b)
    before = digest(b)

    listed = cli("threads", "--db", b.url, "--json")
    assert listed.returncode == 0, listed.stderr
    page = json.loads(listed.stdout)
    rows = {t["thread_id"]: t for t in page["threads"]}
    assert page["total"] == 3 and set(rows) == {"t1", "t2", "t3"}
    assert rows["t1"]["adopted"] and not rows["t1"]["official_only"]
    assert not rows["t2"]["adopted"] and rows["t2"]["official_only"] and rows["t2"]["unadopted"] == len(ids["t2"])
    assert rows["t2"]["head_checkpoint_id"] == ids["t2"][0] and rows["t2"]["checkpoint_count"] == len(ids["t2"])
    table = cli("threads", "--db", b.url)
    assert re.search(r"t2 \(official\)", table.stdout) and "not adopted yet" in table.stdout
    assert len(json.loads(cli("threads", "--db", b.url, "--json", "--limit", "1", "--offset", "1").stdout)["threads"]) == 1

    shown = cli("show", "t2", "--db", b.url, "--json")
    assert shown.returncode == 0, shown.stderr
    state = json.loads(shown.stdout)
    assert state["checkpoint_id"] == ids["t2"][0] and state["next"] == [APPROVAL]
    assert "not adopted yet" in shown.stderr
    history = cli("history", "t2", "--db", b.url, "--json")
    assert history.returncode == 0, history.stderr
    assert sorted(n["checkpoint_id"] for n in json.loads(history.stdout)["namespaces"][""]) == sorted(ids["t2"])
    changed = cli("diff", "t2", ids["t2"][1], ids["t2"][0], "--db", b.url, "--json")
    assert changed.returncode == 0, changed.stderr
    assert cli("audit", "t2", "--db", b.url, "--json").returncode == 0
    latest = cli("latest", "messages", "--db", b.url, "--json")
    assert latest.returncode == 0, latest.stderr
    assert {v["thread_id"] for v in json.loads(latest.stdout)} == {"t1", "t2", "t3"}
    assert [v["thread_id"] for v in json.loads(cli("latest", "messages", "t3", "--db", b.url, "--json").stdout)] == ["t3"]
    one_line_error(cli("show", "t9", "--db", b.url), 2, "unknown thread 't9'")

    assert digest(b) == before  # nothing written: no adoption, no table, no touch


def test_cli_reads_a_database_only_the_official_saver_wrote(tmp_path: Path) -> None:
    path = str(tmp_path / "official.db")
    ids = official_threads(path, False, "t2")
    before = sqlite_digest(path)

    listed = cli("threads", "--db", path, "--json")
    assert listed.returncode == 0, listed.stderr
    [row] = json.loads(listed.stdout)["threads"]
    assert (row["thread_id"], row["official_only"], row["checkpoint_count"]) == ("t2", True, len(ids["t2"]))
    shown = cli("show", "t2", "--db", path, "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["next"] == [APPROVAL]
    one_line_error(cli("history", "nope", "--db", path), 2, "unknown thread 'nope'")
    # what needs threadline's tables still says what the database is and what to do
    one_line_error(cli("stats", "--db", path), 2, "official SqliteSaver", "threadline import")

    assert sqlite_digest(path) == before
    tables = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert not any(t.startswith("threadline_") for t in tables)


# --- the browser ------------------------------------------------------------------------------


def test_ui_browses_an_official_database_writing_nothing_until_an_action(tmp_path: Path) -> None:
    path = str(tmp_path / "official.db")
    ids = official_threads(path, False, "t2")
    before = sqlite_digest(path)
    with client(UIConfig(db=path)) as c:  # writable: no --read-only
        page = c.get("/")
        assert page.status_code == 200
        assert 'data-thread="t2"' in page.text and "official · not adopted" in page.text
        assert 'data-status="interrupted"' in page.text and re.search(r'id="thread-count">1\b', page.text)
        thread = c.get("/thread?thread_id=t2")
        assert thread.status_code == 200 and "not adopted by threadline yet" in thread.text
        checkpoint = c.get(f"/checkpoint?thread_id=t2&checkpoint_id={ids['t2'][0]}")
        assert checkpoint.status_code == 200 and APPROVAL in checkpoint.text
        graph = c.get("/api/graph?thread_id=t2").json()
        assert {n["id"] for n in graph["nodes"]} == set(ids["t2"])
        preview = c.get(f"/confirm/fork?thread_id=t2&checkpoint_id={ids['t2'][0]}&to_thread=t2-copy")
        assert preview.status_code == 200
        assert sqlite_digest(path) == before  # looked at everything, previewed an action: nothing written

        csrf = re.search(r'name="csrf" value="([^"]+)"', preview.text)[1]
        done = c.post("/do/fork", data={"csrf": csrf, "thread_id": "t2", "checkpoint_id": ids["t2"][0], "to_thread": "t2-copy"},
                      follow_redirects=False)
        assert done.status_code == 303, done.text
        after = c.get("/").text  # the adopted thread and the fork, both threadline's now
        assert 'data-thread="t2-copy"' in after and 'data-thread="t2"' in after and "official · not adopted" not in after
    con = sqlite3.connect(path)
    assert con.execute("SELECT thread_id FROM threadline_adopted").fetchall() == [("t2",)]
    assert {r[0] for r in con.execute("SELECT DISTINCT thread_id FROM threadline_checkpoints")} == {"t2", "t2-copy"}


def test_threadline_ui_command_on_an_official_database(tmp_path: Path) -> None:
    """``threadline ui --db official.db`` (no --read-only) as a real process: the threads page
    lists the official thread, and the file is unchanged while the server runs and after."""
    path = str(tmp_path / "official.db")
    official_threads(path, False, "t2")
    before = sqlite_digest(path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("THREADLINE_")}
    proc = subprocess.Popen([str(EXE), "ui", "--db", path, "--no-browser", "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = ""
        while "token=" not in url:  # "threadline ui for … at", then the URL
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            url = line.strip()
        opener = loopback_opener()  # the printed URL names this run's *.localhost host
        text = opener.open(url, timeout=30).read().decode()
        assert 'data-thread="t2"' in text and "official · not adopted" in text
        assert sqlite_digest(path) == before
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    assert sqlite_digest(path) == before
    tables = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert not any(t.startswith("threadline_") for t in tables)


def test_ui_on_a_half_migrated_postgres_database(pg_url: str) -> None:
    from threadline import PostgresSaver

    official_threads(pg_url, True, "t1", "t2")
    with PostgresSaver.from_conn_string(pg_url) as tl:
        assert tl.get_tuple(conf("t1")) is not None
    before = pg_digest(pg_url)
    with client(UIConfig(db=pg_url)) as c:
        text = c.get("/").text
        assert 'data-thread="t1"' in text and 'data-thread="t2"' in text and text.count("official · not adopted") == 1
        assert c.get("/thread?thread_id=t2").status_code == 200
        assert c.get("/api/graph?thread_id=t2").json()["nodes"]
    assert pg_digest(pg_url) == before


def test_official_database_in_chromium(browser: Any, tmp_path: Path) -> None:
    """The same in a real browser: the official thread is listed with its badge and status, its
    branch graph drawn, and the database file is the same afterwards."""
    path = str(tmp_path / "official.db")
    ids = official_threads(path, False, "t2")
    before = sqlite_digest(path)
    with running(UIConfig(db=path, poll_seconds=0.3)) as url:
        tab = Tab(browser, url, "official")
        row = tab.page.locator('tr[data-thread="t2"]')
        assert row.locator("[data-status]").inner_text() == "interrupted"
        assert "official · not adopted" in row.inner_text()
        tab.shot("threads")
        row.locator("a").click()
        timings = tab.graph_ready()
        assert timings["checkpoints"] == len(ids["t2"])
        assert "not adopted by threadline yet" in tab.page.locator("#thread-header").inner_text()
        tab.shot("thread")
        tab.close()
    assert sqlite_digest(path) == before
