"""What a newcomer tripped on in the ``threadline`` command (issue 31, items 7-11, 13, 14),
each through a real process (``cli_support.cli``): names people copy from the tables and
git's ``^``/``~N``, retention words that say what it does, ``diff`` and ``rollback`` with
one checkpoint, a paused thread shown without loading LangChain's runtime, tables read at
80 columns, help and errors in the command's own terms, an export hint that works, and
``fsck`` on a SQLite value row holding text."""

from __future__ import annotations

import io
import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from cli_support import ROOT, TESTS, cli, one_line_error, sqlite_digest
from threadline.cli import app
from threadline.cli.store import store_app


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, object]:
    """The demo database (two branches, an answered interrupt) and the demo's result."""
    from threadline.demo import run_demo

    path = tmp_path_factory.mktemp("demo") / "threadline-demo.db"
    return path, run_demo(str(path), Console(file=io.StringIO(), width=100))


def copy(db: Path, tmp_path: Path, name: str = "copy.db") -> str:
    target = tmp_path / name
    shutil.copy(db, target)
    return str(target)


def js(*args: str) -> object:
    """A read command's JSON, run in this process (the subprocess path is what ``cli`` tests:
    a CLI start costs a second or more, and these tests read dozens of names)."""
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def nodes_of(db: str, tid: str) -> dict[str, dict]:
    return {n["checkpoint_id"]: n for n in js("history", tid, "--db", db)["namespaces"][""]}


# --- 7. short ids as shown, and git's ^ and ~N -------------------------------------------------


def test_any_six_digits_of_a_shown_id_and_gits_parent_forms(demo):
    path, result = demo
    db, tid = str(path), result.thread_id
    shown = cli("history", tid, "--db", db, columns=200).stdout
    nodes = nodes_of(db, tid)
    head = next(cid for cid, n in nodes.items() if n["is_head"])
    parent = {cid: n["parent_checkpoint_id"] for cid, n in nodes.items()}
    # the short ids the history shows: their first 6 digits, a run in their middle, all 8
    short_ids = re.findall(r"([0-9a-f]{8})(?: \([^)]*\))?  step ", shown)
    assert len(short_ids) == len(nodes)
    by_short = {cid.replace("-", "")[-8:]: cid for cid in nodes}
    for short in short_ids[:6]:
        for name in (short[:6], short[1:7], short, f"…{short}"):
            got = js("show", tid, name, "--db", db)
            assert got["checkpoint_id"] == by_short[short], name
    # git's forms, after HEAD, a short id or step:N
    expect = {
        "HEAD^": parent[head],
        "HEAD^^": parent[parent[head]],
        "HEAD~2^": parent[parent[parent[head]]],
        "HEAD^0": head,
        "HEAD^1": parent[head],
        f"{head[-8:]}^": parent[head],
        f"{parent[head][-6:]}~1": parent[parent[head]],
        "step:3^": next(cid for cid, n in nodes.items() if n["step"] == 2 and n["on_head_path"]),
    }
    for name, cid in expect.items():
        assert js("show", tid, name, "--db", db)["checkpoint_id"] == cid, name
    one_line_error(cli("show", tid, "HEAD^2", "--db", db), 2, "one parent", "^2")
    one_line_error(cli("show", tid, "HEAD^^^^^^^^^^^^^^^^^^^^", "--db", db), 2, "goes past the first checkpoint")
    one_line_error(cli("show", tid, "zzzzzz", "--db", db), 2, "HEAD^")


# --- 8. prune --keep-last: per branch, as said; per thread on request ---------------------------


def test_keep_last_counts_per_branch_as_the_help_says_and_per_thread_on_request(demo, tmp_path):
    path, result = demo
    db, tid = copy(path, tmp_path), result.thread_id
    nodes = nodes_of(db, tid)
    children: dict[str, list[str]] = {cid: [] for cid in nodes}
    for cid, n in nodes.items():
        if n["parent_checkpoint_id"]:
            children[n["parent_checkpoint_id"]].append(cid)
    tips = [cid for cid, kids in children.items() if not kids]
    assert len(tips) == 2  # the demo's two branches

    def newest(tip: str, n: int) -> set[str]:
        out, cur = set(), tip
        while cur and len(out) < n:
            out.add(cur)
            cur = nodes[cur]["parent_checkpoint_id"]
        return out

    per_branch = newest(tips[0], 3) | newest(tips[1], 3)
    plan = js("prune", "--keep-last", "3", "--dry-run", "--verbose", "--db", db)
    gone = {c["checkpoint_id"] for c in plan["threads"][0]["checkpoints"]}
    assert set(nodes) - gone == per_branch and plan["policy"]["keep_last_per"] == "branch"
    plan = js("prune", "--keep-last", "3", "--per", "thread", "--dry-run", "--db", db)
    gone = {c["checkpoint_id"] for c in plan["threads"][0]["checkpoints"]}
    assert set(nodes) - gone == set(sorted(nodes)[-3:]) and plan["policy"]["keep_last_per"] == "thread"
    # the words say the same
    helped = " ".join(cli("prune", "--help", columns=200).stdout.split())
    assert "Keep the newest N checkpoints of each branch" in helped and "--per branch|thread" in helped
    docs = " ".join((ROOT / "docs" / "cli.md").read_text().split())
    assert "all but the newest N checkpoints of **each branch**" in docs and "With `--per thread`" in docs
    assert "checkpoints of each thread" not in docs
    one_line_error(cli("prune", "--keep-last", "3", "--per", "day", "--db", db), 2, "--per")
    # and it does it
    done = js("prune", "--keep-last", "3", "--per", "thread", "--yes", "--db", db)
    assert done["checkpoints"] == len(nodes) - 3 and set(nodes_of(db, tid)) == set(sorted(nodes)[-3:])


# --- 9. diff with one checkpoint; a rollback to the head ------------------------------------------


def test_diff_of_one_checkpoint_is_against_its_parent(demo):
    path, result = demo
    db, tid = str(path), result.thread_id
    nodes = nodes_of(db, tid)
    head = next(cid for cid, n in nodes.items() if n["is_head"])
    one = js("diff", tid, "HEAD", "--db", db)
    assert (one["a"], one["b"]) == (nodes[head]["parent_checkpoint_id"], head)
    assert one == js("diff", tid, nodes[head]["parent_checkpoint_id"], head, "--db", db)
    assert one["channels"]["messages"]["kind"] == "changed"
    first = next(cid for cid, n in nodes.items() if n["parent_checkpoint_id"] is None)
    one_line_error(cli("diff", tid, first[-8:], "--db", db), 2, "first checkpoint", "no parent", "diff THREAD A B")


def test_a_rollback_to_the_head_says_so_and_writes_nothing(demo, tmp_path):
    path, result = demo
    db, tid = copy(path, tmp_path), result.thread_id
    before = sqlite_digest(db)
    proc = cli("rollback", tid, "HEAD", "--db", db)
    assert proc.returncode == 0, proc.stderr
    assert "nothing to roll back" in proc.stdout and "already the head" in proc.stdout and "nothing was written" in proc.stdout
    assert sqlite_digest(db) == before
    report = js("rollback", tid, "HEAD", "--db", db)
    assert report["written"] is False and report["checkpoint_id"] == report["previous_head"]
    assert sqlite_digest(db) == before
    moved = js("rollback", tid, "HEAD^", "--db", db)  # a rollback that does something still writes
    assert moved["written"] is True and sqlite_digest(db) != before


# --- 10. a paused thread is shown without LangChain's runtime ----------------------------------


def test_show_at_an_interrupt_does_not_import_langsmith(demo):
    path, result = demo
    paused = next(cid for cid, n in nodes_of(str(path), result.thread_id).items() if n["interrupted"])
    code = (
        "import io, json, sys\n"
        "from contextlib import redirect_stdout\n"
        "from threadline.cli import app\n"
        "out = io.StringIO()\n"
        "with redirect_stdout(out):\n"
        f"    app(['show', {result.thread_id!r}, {paused!r}, '--db', {str(path)!r}, '--json'], standalone_mode=False)\n"
        "view = json.loads(out.getvalue())\n"
        "print(json.dumps({'langsmith': 'langsmith' in sys.modules, 'types': 'langgraph.types' in sys.modules,\n"
        "                  'answered': view['answered'], 'writes': view['pending_writes']}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["langsmith"] is False and seen["types"] is False
    # the interrupt is still read whole: its value, its id, the node that raised it (answered: with its answer)
    (interrupt,) = seen["answered"]
    assert interrupt["value"]["tool"] == "get_quote" and interrupt["id"] and interrupt["node"] == "call_tool"
    assert "answer" in interrupt
    stored = next(w for w in seen["writes"] if w["channel"] == "__interrupt__")
    assert stored["value"][0]["_type"] == "Interrupt" and stored["value"][0]["value"]["tool"] == "get_quote"
    # and people see it
    shown = cli("show", result.thread_id, paused[-8:], "--db", str(path), columns=200).stdout
    assert "interrupt in call_tool" in shown and "get_quote" in shown


# --- 11. at 80 columns; words --------------------------------------------------------------------


def test_history_rows_fit_80_columns(demo):
    path, result = demo
    out = cli("history", result.thread_id, "--db", str(path), columns=80).stdout
    lines = out.splitlines()
    nodes = nodes_of(str(path), result.thread_id)
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    rows = [line for line in lines if re.search(r"[├└]── [0-9a-f]{8}", line)]
    assert len(rows) == len(nodes)  # one line per checkpoint: nothing wrapped onto a second line
    assert len(lines) == len(rows) + 1 + 2  # the title and two "branch N" lines
    head = next(cid for cid, n in nodes.items() if n["is_head"])
    assert any(f"{head[-8:]} (HEAD)" in line for line in rows)
    assert sum("interrupted" in line for line in rows) == 1 and sum("fork: 2 branches" in line for line in rows) == 1
    assert re.search(r"\(17 checkpoints, 1 fork point, \d{4}-\d\d-\d\d UTC\)", lines[0])
    assert all(re.search(r"step -?\d+  \w+  \d\d:\d\d:\d\d", line) for line in rows)


def test_audit_shows_whole_times_at_80_columns(demo):
    path, result = demo
    out = cli("audit", result.thread_id, "--db", str(path), columns=80).stdout
    rows = [line for line in out.splitlines() if re.match(r"[0-9a-f]{8} ", line)]
    assert len(rows) > 20 and all(len(line) <= 80 for line in out.splitlines())
    assert all(re.search(r" \d\d:\d\d:\d\d$", line) for line in rows), rows[:3]
    assert "…" not in "".join(line[:10] for line in rows)  # checkpoint ids whole too


def test_store_search_shows_keys_whole_at_80_columns(tmp_path):
    db = str(tmp_path / "store.db")
    long_value = json.dumps({"note": "a long note that goes on and on about the preferences of this user " * 3})
    assert cli("store", "put", "users.123", "t-42", long_value, "--db", db).returncode == 0
    out = cli("store", "search", "users", "--db", db, columns=80).stdout
    lines = out.splitlines()
    assert lines[0].startswith("1 item ") or lines[0].strip() == "1 item"
    row = next(line for line in lines if line.startswith("users.123"))
    assert " t-42 " in row and len(row) <= 80 and row.rstrip().endswith("…")
    assert re.search(r" \d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", row)
    assert cli("store", "put", "users.123", "prefs", '{"theme": "dark"}', "--db", db).returncode == 0
    assert cli("store", "search", "--db", db).stdout.splitlines()[0].startswith("2 items")


def test_help_names_arguments_as_typed():
    proc = cli("import", "--help", columns=100)
    assert proc.stdout.startswith("Usage: threadline import [OPTIONS] SOURCE\n")
    assert "\n  SOURCE  An official LangGraph database" in proc.stdout
    runner = CliRunner()
    commands = [[cmd.name or cmd.callback.__name__] for cmd in app.registered_commands]
    commands += [["store", c.name] for c in store_app.registered_commands]
    assert len(commands) > 20
    for command in commands:
        text = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "100"}).stdout
        usage = text.splitlines()[0]
        assert usage.startswith(f"Usage: threadline {' '.join(command)} "), usage
        assert not re.search(r"[{}]|\[\[", usage), usage
        assert not re.search(r"<(str|int|float|bool)>", text), (command, text)
    assert "Usage: threadline latest [OPTIONS] CHANNEL [THREAD]..." in runner.invoke(app, ["latest", "--help"]).stdout
    assert "Usage: threadline show [OPTIONS] THREAD [CHECKPOINT]" in runner.invoke(app, ["show", "--help"]).stdout


def test_errors_name_options_not_library_arguments(demo, tmp_path):
    path, result = demo
    db = copy(path, tmp_path)
    target = tmp_path / "bundle.db"
    assert cli("bundle-export", result.thread_id, "--to", str(target), "--db", db).returncode == 0
    line = one_line_error(cli("bundle-export", result.thread_id, "--to", str(target), "--db", db), 2, "already exists", "--overwrite")
    assert "overwrite=True" not in line and "CLI" not in line
    backup = tmp_path / "backup.db"
    assert cli("backup", "--to", str(backup), "--db", db).returncode == 0
    line = one_line_error(cli("restore", str(backup), "--db", db), 2, "already exist", "--replace")
    assert "replace=True" not in line
    line = one_line_error(cli("delete", result.thread_id, result.branch_point, "--yes", "--db", db), 1, "--with-descendants", "--reparent")
    assert "mode=" not in line and "CLI" not in line
    # the library keeps its own words
    from threadline import lifecycle, open_saver
    from threadline.errors import UnsafeOperationError

    with open_saver(db) as saver, pytest.raises(UnsafeOperationError, match="mode='with_descendants'") as caught:
        lifecycle.delete_checkpoint(saver, result.thread_id, result.branch_point)
    assert "--with-descendants" not in str(caught.value)


# --- 13. export: a query that runs --------------------------------------------------------------


def test_export_suggests_the_duckdb_python_package_and_the_suggestion_runs(demo, tmp_path):
    path, _ = demo
    out_dir = tmp_path / "it's exported"
    proc = cli("export", "--to", str(out_dir), "--db", str(path), columns=80)
    assert proc.returncode == 0, proc.stderr
    assert "duckdb -c" not in proc.stdout and "DuckDB's Python package" in proc.stdout
    lines = proc.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "import duckdb")
    snippet = "\n".join(line[2:] for line in lines[start:start + 2])
    python = re.search(r"installed with threadline\[export\]\), in (\S+):", " ".join(proc.stdout.split())).group(1)
    assert Path(python).exists()
    ran = subprocess.run([python, "-c", snippet], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert "generate_response" in ran.stdout and "writes" in ran.stdout


# --- 14. fsck on value rows holding text ---------------------------------------------------------


def test_fsck_reports_value_rows_holding_text_and_goes_on(demo, tmp_path):
    path, result = demo
    db = copy(path, tmp_path)
    tid = result.thread_id
    with sqlite3.connect(db) as conn:
        blob_key = conn.execute("SELECT checkpoint_ns, channel, version FROM threadline_blobs WHERE thread_id = ? AND channel = "
                                "'user_context' ORDER BY version LIMIT 1", (tid,)).fetchone()
        conn.execute("UPDATE threadline_blobs SET blob = CAST(x'ff00fe41c3' AS TEXT) WHERE thread_id = ? AND checkpoint_ns = ? "
                     "AND channel = ? AND version = ?", (tid, *blob_key))
        write_key = conn.execute("SELECT checkpoint_id, task_id, idx FROM threadline_writes WHERE thread_id = ? AND channel = "
                                 "'messages' ORDER BY checkpoint_id LIMIT 1", (tid,)).fetchone()
        conn.execute("UPDATE threadline_writes SET blob = CAST(x'c328e282' AS TEXT) WHERE thread_id = ? AND checkpoint_id = ? "
                     "AND task_id = ? AND idx = ?", (tid, *write_key))
        assert conn.execute("SELECT COUNT(*) FROM threadline_blobs WHERE typeof(blob) = 'text'").fetchone()[0] == 1
    quick = cli("fsck", "--db", db, "--json")
    assert quick.returncode == 1, quick.stderr
    found = json.loads(quick.stdout)["findings"]
    assert {f["kind"] for f in found} == {"unreadable_value"} and len(found) == 2
    blob_finding = next(f for f in found if f["detail"].startswith("blob"))
    assert blob_key[1] in blob_finding["detail"] and blob_key[2] in blob_finding["detail"] and "holds text" in blob_finding["detail"]
    write_finding = next(f for f in found if f["detail"].startswith("pending write"))
    assert write_finding["checkpoint_id"] == write_key[0] and write_key[1] in write_finding["detail"]
    shown = cli("fsck", "--db", db, columns=120)
    assert shown.returncode == 1 and "no problem found" not in shown.stdout and "unreadable_value" in shown.stdout
    deep = cli("fsck", "--deep", "--db", db, "--json")
    assert deep.returncode == 1 and deep.stderr == "", deep.stderr  # a report, not an abort
    report = json.loads(deep.stdout)
    assert report["threads_checked"] == 1 and report["deep"]
    decoded = [f for f in report["findings"] if f["checkpoint_id"] and f["detail"].startswith("blob (")]
    assert decoded and all(blob_key[2] in f["detail"] for f in decoded)  # each checkpoint that reads it, named by the row
    # a read of a damaged checkpoint names the row instead of failing on the text
    victim = next(f["checkpoint_id"] for f in decoded if f["checkpoint_id"] != write_key[0])
    line = one_line_error(cli("show", tid, victim, "--db", db), 1, blob_key[2], "threadline fsck")
    assert "not UTF-8" not in line
    assert cli("show", tid, "--db", db).returncode == 0  # the head does not read that value
