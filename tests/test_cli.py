"""The `threadline` lifecycle commands through typer's CliRunner (every command, --json parsed)
and as a real subprocess, on the demo database and on a graph with branches and subgraphs."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from lifecycle_graphs import build_graph, cfg, populate
from threadline import open_saver
from threadline import read as H
from threadline.cli import app

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
runner = CliRunner()


def run(*args: str, code: int = 0, env: dict | None = None):
    result = runner.invoke(app, list(args), env={"COLUMNS": "200", **(env or {})})
    assert result.exit_code == code, (args, result.exit_code, result.output, result.exception)
    return result


def js(*args: str, code: int = 0, env: dict | None = None):
    result = run(*args, "--json", code=code, env=env)
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory):
    from threadline.demo import run_demo

    path = str(tmp_path_factory.mktemp("demo") / "threadline-demo.db")
    result = run_demo(path, Console(file=io.StringIO()))
    return path, result


def test_read_commands_json(db):
    backend, facts = db
    url = backend.url
    page = js("threads", "--db", url)
    assert page["total"] == 3 and {t["thread_id"] for t in page["threads"]} == {"t-research", "t-answer", "t-interrupt"}
    assert js("threads", "--db", url, "--where", "user=ada")["threads"][0]["thread_id"] == "t-answer"
    assert js("threads", "--db", url, "--limit", "1")["next_offset"] == 1
    assert js("threads", "--db", url, "--idle", "1h")["total"] == 0

    hist = js("history", "t-research", "--db", url, "--subgraphs")
    assert hist["fork_points"] == [facts["fork_point"]]
    assert len([ns for ns in hist["namespaces"] if ns]) == 3
    root = hist["namespaces"][""]
    assert sum(1 for n in root if n["is_head"]) == 1

    head = js("show", "t-interrupt", "--db", url)
    assert head["next"] == ["approve"] and head["interrupts"][0]["value"] == {"question": "approve the answer?"}
    assert head["pending_writes"][0]["channel"] == "__interrupt__" and head["is_head"]
    first = root[0]["checkpoint_id"]
    old = js("show", "t-research", first, "--db", url)
    assert old["checkpoint_id"] == first and not old["is_head"] and old["source"] == "input"
    with_graph = js("show", "t-interrupt", "--db", url, "--graph", "lifecycle_graphs:graph", env={"PYTHONPATH": str(TESTS)})
    assert with_graph["computed_by"] == "graph"

    d = js("diff", "t-research", first, facts["fork_point"], "--db", url)
    assert d["channels"]["messages"]["kind"] == "added" and d["channels"]["notes"]["kind"] == "added"

    audit = js("audit", "t-research", facts["fork_point"], "--db", url)
    assert audit["writes"] == [] and audit["stats"]["writes"] == 0
    audit = js("audit", "t-research", "--db", url)
    assert audit["writes"] and audit["stats"]["writes"] == len(audit["writes"])
    assert {"task_id", "idx", "channel", "task_path", "bytes", "created_at", "node"} <= set(audit["writes"][0])
    whole = js("audit", "--db", url)
    assert whole["writes"] == [] and whole["stats"]["scope"]["thread_id"] is None and whole["stats"]["tasks"]

    latest = js("latest", "route", "t-research", "t-answer", "--db", url)
    assert {r["thread_id"]: r["value"] for r in latest} == {"t-research": "research", "t-answer": "answer"}
    assert len(js("latest", "messages", "--db", url)) == 3

    s = js("stats", "--db", url, "--top", "1")
    assert s["tables"]["checkpoints"]["rows"] == backend.sql("SELECT COUNT(*) FROM threadline_checkpoints")[0][0]
    assert s["dedup_ratio"] > 1 and len(s["top_threads"]) == 1

    # human output renders too
    for args in (("threads",), ("history", "t-research", "--subgraphs"), ("show", "t-interrupt"), ("stats",),
                 ("audit", "t-research"), ("latest", "messages"), ("diff", "t-research", first, facts["fork_point"])):
        out = run(*args, "--db", url).stdout
        assert out.strip()


def test_write_commands_json(db):
    backend, facts = db
    url = backend.url
    with open_saver(url) as saver:
        h = H.thread_history(saver, "t-answer")
        target = h.ordered()[2].checkpoint_id  # after classify
    r = js("rollback", "t-answer", target, "--db", url)
    assert r["parent_checkpoint_id"] == target and r["blobs_copied"] == 0
    f = js("fork", "t-answer", target, "--to", "t-new", "--db", url)
    assert f["thread_id"] == "t-new" and f["blobs_copied"] > 0
    with open_saver(url) as saver:
        g = build_graph(saver)
        assert g.get_state(cfg("t-answer")).next == ("answer",)
        assert g.invoke(None, cfg("t-new"))["messages"][-1].content == "draft reviewed"
    # delete refuses with children, then works when told how
    err = run("delete", "t-research", facts["fork_point"], "--db", url, code=1)
    assert "with-descendants" in err.output or "with_descendants" in err.output
    dry = js("delete", "t-research", facts["fork_point"], "--reparent", "--dry-run", "--db", url)
    assert dry["executed"] is False and len(dry["reparented"]) == 2
    done = js("delete", "t-research", facts["fork_point"], "--reparent", "--yes", "--db", url)
    assert done["executed"] and done["bytes_freed"] == dry["bytes_freed"]
    run("delete", "t-research", facts["fork_point"], "--with-descendants", "--reparent", "--db", url, code=2)
    # prune: dry run lists, then apply
    plan = js("prune", "--keep-last", "2", "--dry-run", "--db", url)
    assert plan["dry_run"] and plan["checkpoints"] > 0 and plan["bytes_freed"] > 0
    assert all(t["checkpoints"] for t in plan["threads"])
    applied = js("prune", "--keep-last", "2", "--yes", "--db", url)
    assert applied["checkpoints"] == plan["checkpoints"] and applied["bytes_freed"] == plan["bytes_freed"]
    assert js("prune", "--keep-last", "2", "--yes", "--db", url)["checkpoints"] == 0
    run("prune", "--db", url, code=2)  # no policy
    run("prune", "--older-than", "soon", "--db", url, code=2)
    fsck = js("fsck", "--deep", "--db", url)
    assert fsck["ok"] and fsck["threads_checked"] == 4
    # damage → fsck exits 1, --repair fixes the safe part
    backend.sql("INSERT INTO threadline_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, type, blob, created_at) "
                 "VALUES ('t-new', '', 'nope', 't', 0, 'x', '', 'null', NULL, 0)")
    bad = js("fsck", "--db", url, code=1)
    assert bad["by_kind"] == {"orphan_writes": 1}
    fixed = js("fsck", "--repair", "--db", url)
    assert fixed["ok"] and fixed["findings"][0]["repaired"]
    # rebuild with the graph
    with open_saver(url) as saver:
        loop = next(n for n in reversed(H.thread_history(saver, "t-interrupt").ordered()) if n.source == "loop" and n.parent_checkpoint_id)
    rb = js("rebuild", "t-interrupt", loop.checkpoint_id, "--graph", "lifecycle_graphs:graph", "--db", url,
            env={"PYTHONPATH": str(TESTS)})
    assert rb["differs"] == {} and rb["missing"] == [] and rb["matches"]
    run("rebuild", "t-interrupt", loop.checkpoint_id, "--db", url, code=2)  # no graph


def test_errors_are_clear(tmp_path):
    missing = str(tmp_path / "nope.db")
    r = run("threads", "--db", missing, code=2)
    assert "does not exist" in r.output and not os.path.exists(missing)
    with open_saver(str(tmp_path / "x.db")) as saver:
        populate(saver)
    r = run("show", "no-thread", "--db", str(tmp_path / "x.db"), code=2)
    assert "no-thread" in r.output
    r = run("show", "t-answer", "--graph", "no_such_module:graph", "--db", str(tmp_path / "x.db"), code=2)
    assert "no_such_module" in r.output
    run("threads", "--where", "novalue", "--db", str(tmp_path / "x.db"), code=2)
    # a damaged row: one line naming the row and the way out, nothing deleted
    with sqlite3.connect(tmp_path / "x.db") as conn:
        head = conn.execute("SELECT MAX(checkpoint_id) FROM threadline_checkpoints WHERE thread_id = 't-answer'").fetchone()[0]
        conn.execute("UPDATE threadline_checkpoints SET checkpoint = '{not json' WHERE checkpoint_id = ?", (head,))
        before = conn.execute("SELECT COUNT(*) FROM threadline_checkpoints").fetchone()[0]
    r = run("prune", "--keep-last", "1", "--thread", "t-answer", "-y", "--db", str(tmp_path / "x.db"), code=1)
    assert head in r.output and "stored JSON is unreadable" in r.output and "threadline fsck" in r.output
    assert "Traceback" not in r.output
    with sqlite3.connect(tmp_path / "x.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM threadline_checkpoints").fetchone()[0] == before


def test_every_command_on_the_demo_database(demo_db, tmp_path):
    path, result = demo_db
    env = {"THREADLINE_DB": path}
    page = js("threads", env=env)
    assert [t["thread_id"] for t in page["threads"]] == [result.thread_id]
    hist = js("history", result.thread_id, env=env)
    assert hist["fork_points"] == [result.branch_point]
    head = js("show", result.thread_id, env=env)
    assert head["values"]["messages"] and head["is_head"]
    shown = js("show", result.thread_id, "--graph", "threadline.demo:build_graph", env=env)
    assert shown["computed_by"] == "graph" and shown["values"]["messages"] == head["values"]["messages"]
    d = js("diff", result.thread_id, result.branch_point, head["checkpoint_id"], env=env)
    assert d["channels"]["messages"]["messages"]["added"]
    assert js("audit", result.thread_id, env=env)["stats"]["tasks"]
    latest = js("latest", "messages", env=env)
    assert latest[0]["thread_id"] == result.thread_id and latest[0]["present"]
    assert js("stats", env=env)["tables"]["checkpoints"]["rows"] == result.checkpoint_count
    assert js("fsck", "--deep", env=env)["ok"]
    # write commands on a copy of the demo database
    import shutil

    copy = str(tmp_path / "demo-copy.db")
    shutil.copy(path, copy)
    env = {"THREADLINE_DB": copy}
    nodes = js("history", result.thread_id, env=env)["namespaces"][""]
    target = next(n["checkpoint_id"] for n in nodes if n["source"] == "loop" and n["on_head_path"])
    js("rollback", result.thread_id, target, env=env)
    js("fork", result.thread_id, target, "--to", "demo-fork", env=env)
    loop = [n for n in nodes if n["source"] == "loop"]
    rb = js("rebuild", result.thread_id, loop[-1]["checkpoint_id"], "--graph", "threadline.demo:build_graph", env=env)
    assert rb["differs"] == {} and rb["missing"] == []
    assert js("prune", "--keep-last", "3", "--yes", env=env)["checkpoints"] > 0
    assert js("fsck", "--deep", env=env)["ok"]
    out = js("export", "--to", str(tmp_path / "pq"), env=env)
    assert out["rows"]["checkpoints"] > 0


def test_real_subprocess(demo_db, tmp_path):
    path, result = demo_db
    exe = ROOT / ".venv" / "bin" / "threadline"
    if not exe.exists():
        exe = Path(sys.executable).parent / "threadline"
    env = {**os.environ, "THREADLINE_DB": path, "COLUMNS": "160"}
    proc = subprocess.run([str(exe), "threads", "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["threads"][0]["thread_id"] == result.thread_id
    proc = subprocess.run([str(exe), "history", result.thread_id], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and result.branch_point[-8:] in proc.stdout and "fork point" in proc.stdout
    proc = subprocess.run([str(exe), "show", "nope", "--db", path], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2 and "nope" in proc.stderr and proc.stdout == ""
