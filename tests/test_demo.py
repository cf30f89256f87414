"""``threadline demo``: the scripted agent run, in-process (typer CliRunner) and as a real process.

Each run must show the interrupt, resume it from a fresh saver, fork a branch from an
earlier checkpoint, and print the checkpoint tree and the disk summary; the database
it leaves must hold exactly that history.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from typer.testing import CliRunner

from threadline import SqliteSaver
from threadline.cli import app
from threadline.demo import BRANCH_MESSAGE, THREAD_ID, TURNS, build_graph, compile_graph
from threadline.demo.agent import extract_context
from threadline.demo.model import advisor_prompt, scripted_reply

CONFIG = {"configurable": {"thread_id": THREAD_ID}}


def threadline_exe() -> str:
    """The console script installed next to this interpreter (``.venv/bin/threadline``)."""
    exe = Path(sys.executable).parent / "threadline"
    if exe.exists():
        return str(exe)
    found = shutil.which("threadline")
    if found is None:
        pytest.fail("the `threadline` console script is not installed (pip install -e .)")
    return found


def check_output(out: str) -> None:
    # the turns, node by node (rich wraps long lines: compare with whitespace collapsed)
    flat = " ".join(out.split())
    for text in (*TURNS, BRANCH_MESSAGE):
        assert f"user: {text}" in flat or f"user (on the new branch): {text}" in flat
    for node in ("▸ retrieve_context", "▸ search_products", "▸ generate_response", "▸ call_tool"):
        assert node in out
    assert "user_context =" in out and "search_results =" in out and "messages +=" in out
    # the interrupt, the restart and the resume
    assert "⏸ interrupt: human approval needed" in out
    assert "get_quote(product_id='M001', age=28)" in out
    assert "Opening a new SqliteSaver" in out
    assert "next = ['call_tool']" in out
    assert "Command(resume={'approved': True})" in out
    assert "tool get_quote:" in out and "+2 after resume" in out
    # time travel
    assert "now has 2 children; both branches are kept" in out
    # the tree
    assert "The thread's checkpoint tree" in out
    assert "thread thread_abc123  (17 checkpoints)" in out
    assert "⑂ 2 branches" in out and "branch 1 (from …" in out and "branch 2 (from …" in out
    assert "⏸ resumed" in out and "◆ HEAD" in out and "◇ tip" in out
    # the disk
    assert "What is on disk" in out
    for table in ("checkpoints", "blobs", "writes", "threads", "migrations"):
        assert f"\n{table} " in out
    assert "bytes" in out and "file " in out and "blob rows hold them" in out


def message_summary(messages: list) -> list[tuple[str, str]]:
    summary = []
    for m in messages:
        if isinstance(m, AIMessage) and m.tool_calls:
            summary.append(("ai", "call " + ",".join(tc["name"] for tc in m.tool_calls)))
        elif isinstance(m, ToolMessage):
            summary.append(("tool", m.name))
        else:
            summary.append((m.type, str(m.content)[:30]))
    return summary


def check_database(path: Path) -> None:
    assert not Path(f"{path}-wal").exists(), "the saver was not closed (WAL left behind)"
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT COUNT(*) FROM threadline_checkpoints").fetchone()[0] == 17
        assert conn.execute("SELECT DISTINCT thread_id FROM threadline_checkpoints").fetchall() == [(THREAD_ID,)]
        forks = conn.execute(
            "SELECT parent_checkpoint_id, COUNT(*) FROM threadline_checkpoints WHERE parent_checkpoint_id IS NOT NULL "
            "GROUP BY parent_checkpoint_id HAVING COUNT(*) >= 2"
        ).fetchall()
        assert len(forks) == 1 and forks[0][1] == 2, forks
        # the interrupt was stored, and resumed
        assert conn.execute("SELECT COUNT(*) FROM threadline_writes WHERE channel = '__interrupt__'").fetchone()[0] == 1
        assert conn.execute("SELECT COUNT(*) FROM threadline_writes WHERE channel = '__resume__'").fetchone()[0] >= 1
        # only changed channels are stored: fewer blobs than channel references
        refs = conn.execute("SELECT COUNT(*) FROM threadline_checkpoints, json_each(threadline_checkpoints.checkpoint, '$.channel_versions')").fetchone()[0]
        assert conn.execute("SELECT COUNT(*) FROM threadline_blobs").fetchone()[0] < refs
        assert conn.execute("SELECT checkpoint_count FROM threadline_threads WHERE thread_id = ?", (THREAD_ID,)).fetchone()[0] == 17
    finally:
        conn.close()
    branch_point = forks[0][0]

    with SqliteSaver.from_conn_string(str(path)) as saver:
        graph = build_graph().compile(checkpointer=saver)
        head = graph.get_state(CONFIG)
        assert head.next == ()
        assert message_summary(head.values["messages"]) == [
            ("human", TURNS[0][:30]),
            ("ai", "Hello! I'm your insurance advis"[:30]),
            ("human", BRANCH_MESSAGE[:30]),
            ("ai", "call search_catalog"),
            ("tool", "search_catalog"),
            ("ai", "I recommend Everyday Accident "[:30]),
        ]
        assert head.values["user_context"] == {"language": "en", "intent": "accident_insurance"}
        assert [p["product_id"] for p in head.values["search_results"]] == ["A001"]
        assert head.parent_config is not None

        # the original branch is still there, with the approved quote
        history = list(graph.get_state_history(CONFIG))
        children = [s for s in history if (s.parent_config or {}).get("configurable", {}).get("checkpoint_id") == branch_point]
        assert len(children) == 2
        tips = [s for s in history if s.next == () and len(s.values.get("messages", [])) == 8]
        assert len(tips) == 1
        old = tips[0].values
        assert message_summary(old["messages"])[2:] == [
            ("human", TURNS[1][:30]),
            ("ai", "call search_catalog"),
            ("tool", "search_catalog"),
            ("ai", "call get_quote"),
            ("tool", "get_quote"),
            ("ai", "Your quote for Million Medical"),
        ]
        assert json.loads(old["messages"][6].content)["status"] == "quoted"
        assert old["user_context"] == {"language": "en", "intent": "medical_insurance", "age": 28, "budget": 5000}
        # the branch point is the end of turn 1
        point = next(s for s in history if s.config["configurable"]["checkpoint_id"] == branch_point)
        assert point.next == () and len(point.values["messages"]) == 2


def test_demo_in_process(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    result = CliRunner().invoke(app, ["demo", "--db", str(db)])
    assert result.exit_code == 0, result.output + repr(result.exception)
    check_output(result.output)
    assert "Removed the previous demo database" not in result.output
    check_database(db)

    # a second run starts from a fresh file, and says so
    again = CliRunner().invoke(app, ["demo", "--db", f"sqlite:///{db}"])
    assert again.exit_code == 0, again.output + repr(again.exception)
    assert "Removed the previous demo database" in again.output
    check_database(db)


def test_demo_subprocess(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    env = {**os.environ, "THREADLINE_DB": str(tmp_path / "not-this-one.db")}
    proc = subprocess.run(
        [threadline_exe(), "demo", "--db", str(db)], capture_output=True, text=True, encoding="utf-8",
        env=env, cwd=tmp_path, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check_output(proc.stdout)
    check_database(db)
    assert not (tmp_path / "not-this-one.db").exists()


def test_demo_default_path_is_cwd_not_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the demo deletes its file first, so it must not follow $THREADLINE_DB to someone's real database
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("THREADLINE_DB", str(tmp_path / "precious.db"))
    result = CliRunner().invoke(app, ["demo"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "threadline-demo.db").exists()
    assert not (tmp_path / "precious.db").exists()


def test_demo_refuses_to_delete_other_data(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE customers (id INTEGER)")
    conn.commit()
    conn.close()
    result = CliRunner().invoke(app, ["demo", "--db", str(db)])
    assert result.exit_code == 1
    assert "Refusing to delete" in result.output
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT name FROM sqlite_schema").fetchall() == [("customers",)]
    conn.close()

    not_sqlite = tmp_path / "notes.txt"
    not_sqlite.write_text("hello " * 1000)
    result = CliRunner().invoke(app, ["demo", "--db", str(not_sqlite)])
    assert result.exit_code == 1 and not_sqlite.read_text().startswith("hello")

    forced = CliRunner().invoke(app, ["demo", "--db", str(db), "--force"])
    assert forced.exit_code == 0, forced.output
    check_database(db)


def test_demo_rejects_postgres_url_and_missing_directory(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["demo", "--db", "postgresql://localhost/x"])
    assert result.exit_code == 2
    assert "SQLite file" in result.output
    result = CliRunner().invoke(app, ["demo", "--db", str(tmp_path / "missing" / "demo.db")])
    assert result.exit_code == 2
    assert "No such directory" in result.output


# --- make demo / make test on a fresh clone ------------------------------------


def _make_plan(tmp_path: Path, target: str) -> str:
    """What ``make TARGET`` would run in a checkout holding only the Makefile and pyproject
    (``make -n``: printed, not run)."""
    # as run from a shell: not as a sub-make of `make test` (which would print its directories)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    proc = subprocess.run(["make", "-n", target], cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_demo_installs_the_runtime_only_and_make_test_says_what_it_installs(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parent.parent
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(root / name, tmp_path / name)
    demo = _make_plan(tmp_path, "demo")
    # the base install and the ui extra (the demo ends by pointing at `threadline ui`), no other extra
    assert "-m venv --without-pip .venv" in demo and "uv pip install" in demo and " -e '.[ui]'\n" in demo + "\n"
    assert "[test]" not in demo and "apt-get" not in demo and "chromium" not in demo
    assert demo.strip().endswith(".venv/bin/threadline demo")
    test = _make_plan(tmp_path, "test")
    assert "pip install -q -e '.[test]'" in test and ".venv/bin/python -m pytest" in test
    assert "installing Debian's chromium for the browser tests" in test and "apt-get install" in test
    # once set up for the demo, `make test` adds the test tools to the same .venv, and the demo reinstalls nothing
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / ".runtime").touch()
    assert _make_plan(tmp_path, "demo").strip() == ".venv/bin/threadline demo"
    test = _make_plan(tmp_path, "test")
    assert "-m venv" not in test and "uv pip install" not in test and ".venv/bin/pip install -q -e '.[test]'" in test
    readme = " ".join((root / "README.md").read_text().split())
    assert "make demo # about 20 s the first time" in readme
    assert "It needs a Postgres server" in readme and "and a Redis server" in readme
    # the README states the suite's time, and it stays under CI's 20-minute line for the default suite
    took = re.search(r"takes (\d+)–(\d+) minutes", readme)
    assert took and int(took.group(1)) <= int(took.group(2)) < 20


# --- the agent on its own -------------------------------------------------------


def test_extract_context() -> None:
    assert extract_context("Hi there!") == {"intent": "greeting"}
    assert extract_context(TURNS[1]) == {"intent": "medical_insurance", "age": 28, "budget": 5000}
    assert extract_context(BRANCH_MESSAGE) == {"intent": "accident_insurance"}  # the last-named kind wins


def test_scripted_model_is_a_function_of_the_prompt() -> None:
    products = [{"product_id": "M001", "name": "Million Medical", "price": 399, "coverage": 1, "summary": "s"}]
    prompt = [advisor_prompt({"intent": "medical_insurance", "age": 40}, products), HumanMessage("medical please")]
    first, second = scripted_reply(prompt), scripted_reply(prompt)
    assert first.content == second.content and first.tool_calls == second.tool_calls
    assert first.tool_calls[0]["name"] == "get_quote" and first.tool_calls[0]["args"] == {"product_id": "M001", "age": 40}


def test_declined_tool_call_is_not_run(tmp_path: Path) -> None:
    from langgraph.types import Command

    with SqliteSaver.from_conn_string(str(tmp_path / "agent.db")) as saver:
        graph = compile_graph(saver)
        config = {"configurable": {"thread_id": "t"}}
        out = graph.invoke({"messages": [HumanMessage(TURNS[1])]}, config)
        assert out["__interrupt__"][0].value["tool"] == "get_quote"
        final = graph.invoke(Command(resume={"approved": False}), config)
        assert json.loads(final["messages"][-2].content) == {"status": "declined"}
        assert final["messages"][-1].content.startswith("Understood, I did not request a quote")
