"""What a new user hit pointing the CLI at real databases, each case through a real
``threadline`` process: one-line errors with exit codes, reads that never write, names
that resolve like git's, unknown names as errors, explicit targets for writes, Send tasks
attributed to their node, messages as people read them, summaries that scale, a
version, clean help, completion and user docs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from rich.console import Console
from typer.testing import CliRunner

from cli_support import EXE, LONG_ANSWER, ROOT, cli, one_line_error, pg_digest, run_agent, sqlite_digest
from lifecycle_graphs import populate
from threadline import open_saver
from threadline.cli import app

READS = [
    ("threads",), ("history", "t-research"), ("show", "t-research"), ("show", "t-research", "HEAD~2"),
    ("diff", "t-research", "HEAD~3", "HEAD"), ("audit", "t-research"), ("audit",), ("latest", "messages"),
    ("stats",), ("fsck", "--deep"), ("rebuild", "t-research", "HEAD", "--graph", "lifecycle_graphs:graph"),
]


@pytest.fixture(scope="module")
def lg_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("lg") / "tl.db"
    with open_saver(str(path)) as saver:
        populate(saver)
    return path


@pytest.fixture(scope="module")
def agent_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("agent") / "agent.db"
    with open_saver(str(path)) as saver:
        run_agent(saver)
    return path


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from threadline.demo import run_demo

    path = tmp_path_factory.mktemp("demo") / "threadline-demo.db"
    console = Console(record=True, width=100)
    result = run_demo(str(path), console)
    return path, result, console.export_text()


def copy(db: Path, tmp_path: Path) -> str:
    target = tmp_path / db.name
    shutil.copy(db, target)
    return str(target)


# --- 1. never a traceback ------------------------------------------------------------------


def test_a_file_that_is_not_a_database(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("hello " * 1000)
    before = sqlite_digest(notes)
    for args in (("threads",), ("history", "t"), ("show", "t"), ("stats",), ("fsck",), ("latest", "messages")):
        one_line_error(cli(*args, "--db", str(notes)), 2, "not a SQLite database")
    assert sqlite_digest(notes) == before and sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    one_line_error(cli("threads", "--db", str(tmp_path / "missing.db")), 2, "does not exist")
    one_line_error(cli("threads", "--db", str(tmp_path)), 2, "is a directory")
    one_line_error(cli("threads", "--db", "mysql://x/y"), 2, "unknown database URL scheme")
    assert not (tmp_path / "missing.db").exists()


def test_debug_shows_the_traceback(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("hello")
    proc = cli("threads", "--db", str(notes), "--debug")
    assert proc.returncode != 0 and "Traceback" in proc.stderr
    proc = cli("threads", "--db", str(notes), env={"THREADLINE_DEBUG": "1"})
    assert "Traceback" in proc.stderr


def test_an_official_saver_database_points_to_import(tmp_path):
    from langgraph.checkpoint.sqlite import SqliteSaver as OfficialSqliteSaver

    from lifecycle_graphs import build_graph, cfg, human

    path = tmp_path / "official.db"
    with OfficialSqliteSaver.from_conn_string(str(path)) as saver:
        build_graph(saver).invoke(human("hello", "h1"), cfg("t1"))
    before = sqlite_digest(path)
    # what needs threadline's own tables says what the database is (the listings and the
    # thread reads see its threads: tests/test_half_migrated.py)
    for args in (("stats",), ("audit",), ("fsck",)):
        one_line_error(cli(*args, "--db", str(path)), 2, "official SqliteSaver", "threadline import", "adopt")
    listed = json.loads(cli("threads", "--json", "--db", str(path)).stdout)
    assert [(t["thread_id"], t["adopted"]) for t in listed["threads"]] == [("t1", False)]
    assert sqlite_digest(path) == before
    # the fix the message names works
    target = tmp_path / "threadline.db"
    assert cli("import", str(path), "--db", str(target)).returncode == 0
    assert json.loads(cli("threads", "--json", "--db", str(target)).stdout)["total"] == 1
    one_line_error(cli("import", str(path), "--db", str(tmp_path / "t2.db"), "--thread", "nope"), 2, "unknown thread 'nope'")
    assert not (tmp_path / "t2.db").exists()
    report = json.loads(cli("import", str(path), "--db", str(tmp_path / "t2.db"), "--thread", "t*", "--json").stdout)
    assert [t["thread_id"] for t in report["threads"]] == ["t1"]


def _unshare_works() -> bool:
    if not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _unshare_works(), reason="needs user+mount namespaces (unshare -rm) to mount a read-only copy")
def test_a_backup_on_a_read_only_mount(lg_db, tmp_path):
    backup = tmp_path / "backup"
    backup.mkdir()
    shutil.copy(lg_db, backup / "tl.db")  # a WAL database without its -shm, as a backup holds it
    before = sqlite_digest(backup / "tl.db")
    script = (f"mount --bind -o ro {backup} {backup} && touch {backup}/probe 2>/dev/null && exit 3; "
              f"for c in threads 'history t-research' 'show t-research HEAD~1' stats 'audit t-research'; do "
              f"{EXE} $c --db {backup}/tl.db || exit $?; done")
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=300,
                          env={"COLUMNS": "100", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert "t-research" in proc.stdout and "fork point" in proc.stdout and "values" in proc.stdout
    assert sqlite_digest(backup / "tl.db") == before and sorted(p.name for p in backup.iterdir()) == ["tl.db"]


# --- 2. read means read ------------------------------------------------------------------------


def test_read_commands_leave_sqlite_byte_identical(lg_db, tmp_path):
    path = copy(lg_db, tmp_path)
    before = sqlite_digest(path)
    for args in READS:
        proc = cli(*args, "--db", path)
        assert proc.returncode == 0, (args, proc.stderr)
    assert cli("export", "--to", str(tmp_path / "pq"), "--db", path).returncode == 0
    assert sqlite_digest(path) == before


def test_an_empty_file_stays_empty(tmp_path):
    empty = tmp_path / "empty.db"
    empty.touch()
    for args in (("threads",), ("stats",), ("fsck",)):
        one_line_error(cli(*args, "--db", str(empty)), 2, "holds no threadline tables")
    assert empty.stat().st_size == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]


def test_an_older_schema_is_migrated_only_when_asked(tmp_path):
    path = tmp_path / "old.db"
    shutil.copy(ROOT / "tests" / "fixtures" / "foundation.db", path)  # the first release's table layout
    before = sqlite_digest(path)
    one_line_error(cli("threads", "--db", str(path)), 2, "older threadline release", f"threadline setup --db {path}")
    assert sqlite_digest(path) == before
    proc = cli("setup", "--db", str(path))
    assert proc.returncode == 0 and "schema version" in proc.stdout
    assert json.loads(cli("threads", "--json", "--db", str(path)).stdout)["total"] > 0


def test_postgres_reads_never_write(pg_url, tmp_path):
    url = pg_url
    empty = pg_digest(url)
    one_line_error(cli("threads", "--db", url), 2, "holds no threadline tables")
    one_line_error(cli("stats", "--db", url), 2, "holds no threadline tables")
    assert pg_digest(url) == empty  # no table created
    with open_saver(url) as saver:
        populate(saver)
    before = pg_digest(url)
    for args in READS:
        proc = cli(*args, "--db", url)
        assert proc.returncode == 0, (args, proc.stderr)
    assert cli("export", "--to", str(tmp_path / "pq"), "--db", url).returncode == 0
    assert pg_digest(url) == before


# --- 3. names that resolve like git's ---------------------------------------------------------


def test_the_demo_short_ids_work(demo):
    path, result, printed = demo
    env = {"THREADLINE_DB": str(path)}
    shown = re.findall(r"…([0-9a-f]{8})", printed)
    assert shown and result.branch_point[-8:] in shown
    tid = result.thread_id
    for name in (f"…{result.branch_point[-8:]}", result.branch_point[-8:], result.branch_point[-6:], result.branch_point,
                 result.branch_point.upper()[-10:]):
        got = json.loads(cli("show", tid, name, "--json", env=env).stdout)
        assert got["checkpoint_id"] == result.branch_point, name
    head = json.loads(cli("show", tid, "--json", env=env).stdout)
    assert json.loads(cli("show", tid, "HEAD", "--json", env=env).stdout)["checkpoint_id"] == head["checkpoint_id"]
    parent = json.loads(cli("show", tid, "HEAD~1", "--json", env=env).stdout)
    assert parent["checkpoint_id"] == head["parent_checkpoint_id"]
    at_step = json.loads(cli("show", tid, "step:3", "--json", env=env).stdout)
    assert at_step["step"] == 3
    ambiguous = one_line_error(cli("show", tid, head["checkpoint_id"][:8], env=env), 2, "matches", "give more digits")
    assert re.search(r"[0-9a-f-]{36} \(step -?\d+\)", ambiguous)  # candidates are listed
    one_line_error(cli("show", tid, "HEAD~99", env=env), 2, "goes past")
    one_line_error(cli("show", tid, "step:99", env=env), 2, "step 99")
    one_line_error(cli("show", tid, "12345", env=env), 2, "HEAD~N or step:N")


def _uuid_db(lg_db: Path, tmp_path: Path) -> tuple[str, str]:
    """A copy of the lifecycle database with a thread whose id is a UUID (a fork of t-research)."""
    path = copy(lg_db, tmp_path)
    tid = str(uuid.UUID(int=0x1234_5678_9ABC_DEF0_1234_5678_9ABC_DEF0))
    assert cli("fork", "t-research", "HEAD", "--to", tid, "--db", path).returncode == 0
    return path, tid


@pytest.mark.parametrize("columns", [80, 120])
def test_ids_and_headers_never_wrap(lg_db, tmp_path, columns):
    path, tid = _uuid_db(lg_db, tmp_path)
    page = json.loads(cli("threads", "--json", "--db", path).stdout)
    out = cli("threads", "--db", path, columns=columns).stdout
    assert "checkpoints" in out and "thread_id" in out
    for t in page["threads"]:
        line = next(line for line in out.splitlines() if line.startswith(t["thread_id"]))
        assert t["head_checkpoint_id"][-8:] in line
    hist = json.loads(cli("history", "t-research", "--json", "--subgraphs", "--db", path).stdout)
    out = cli("history", "t-research", "--subgraphs", "--db", path, columns=columns).stdout
    for nodes in hist["namespaces"].values():
        for n in nodes:
            assert re.search(rf"\b{n['checkpoint_id'][-8:]}\b", out)
    audit = json.loads(cli("audit", tid, "--json", "--db", path).stdout)
    out = cli("audit", tid, "--db", path, columns=columns).stdout
    for w in audit["writes"]:
        assert w["checkpoint_id"][-8:] in out and w["task_id"][:8] in out
    for args in (("latest", "messages"), ("stats",), ("history", tid)):
        out = cli(*args, "--db", path, columns=columns).stdout
        assert tid in out, args  # a 36-character thread id on one line


# --- 4. unknown means error; writes need a named target -------------------------------------


@pytest.mark.parametrize("args", [
    ("audit", "nope"), ("latest", "messages", "nope"), ("history", "nope"), ("show", "nope"),
    ("diff", "nope", "HEAD~1", "HEAD"), ("fsck", "--thread", "nope"), ("fsck", "--thread", "nope-*"),
    ("export", "--to", "OUT", "--thread", "nope"), ("prune", "--keep-last", "1", "--thread", "nope", "--yes"),
    ("rollback", "nope", "HEAD"), ("fork", "nope", "HEAD", "--to", "x"), ("delete", "nope", "HEAD", "--yes"),
    ("rebuild", "nope", "HEAD", "--graph", "lifecycle_graphs:graph"),
    ("show", "t-research", "deadbeef"), ("audit", "t-research", "deadbeef"), ("rollback", "t-research", "abcdef"),
])
def test_unknown_threads_and_checkpoints_are_exit_2(lg_db, tmp_path, args):
    path = copy(lg_db, tmp_path)
    before = sqlite_digest(path)
    args = tuple(str(tmp_path / "out") if a == "OUT" else a for a in args)
    line = one_line_error(cli(*args, "--db", path), 2)
    assert "nope" in line or "deadbeef" in line or "abcdef" in line
    assert sqlite_digest(path) == before and not (tmp_path / "out").exists()


def test_fsck_of_a_glob_checks_the_matching_threads(lg_db):
    report = json.loads(cli("fsck", "--thread", "t-r*", "--thread", "t-answer", "--json", "--db", str(lg_db)).stdout)
    assert report["threads_checked"] == 2 and report["ok"]


@pytest.mark.parametrize("args", [
    ("prune", "--keep-last", "1", "--yes"), ("rollback", "t-research", "HEAD~1"), ("fork", "t-research", "HEAD", "--to", "x"),
    ("delete", "t-research", "HEAD", "--yes"), ("fsck", "--repair"), ("import", "official.db"), ("setup",),
    ("rebuild", "t-research", "HEAD", "--apply", "--graph", "lifecycle_graphs:graph"),
])
def test_write_commands_need_a_named_database(lg_db, tmp_path, args):
    demo_db = tmp_path / "threadline-demo.db"
    shutil.copy(lg_db, demo_db)  # the default database for reads is there, and must not be touched
    before = sqlite_digest(demo_db)
    one_line_error(cli(*args, cwd=tmp_path), 2, "--db", "$THREADLINE_DB")
    assert sqlite_digest(demo_db) == before


def test_import_validates_its_source_before_creating_the_target(tmp_path):
    one_line_error(cli("import", "missing.db", "--db", "target.db", cwd=tmp_path), 2, "does not exist")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_prune_and_delete_refuse_without_confirmation_off_a_terminal(lg_db, tmp_path):
    path = copy(lg_db, tmp_path)
    before = sqlite_digest(path)
    one_line_error(cli("prune", "--keep-last", "1", "--db", path), 2, "--yes")
    one_line_error(cli("delete", "t-answer", "HEAD", "--db", path), 2, "--yes")
    assert sqlite_digest(path) == before
    assert cli("prune", "--keep-last", "1", "--dry-run", "--db", path).returncode == 0  # a dry run needs no --yes
    assert json.loads(cli("prune", "--keep-last", "1", "--yes", "--json", "--db", path).stdout)["checkpoints"] > 0


# --- 5. agents as they are ---------------------------------------------------------------------


def test_send_tasks_are_attributed_to_their_node(agent_db, tmp_path):
    db = str(agent_db)
    hist = json.loads(cli("history", "agent-1", "--json", "--db", db).stdout)
    loops = [n for n in hist["namespaces"][""] if n["source"] == "loop" and n["step"] > 0]
    assert [n["writers"] for n in loops] == [["agent"], ["tools"], ["agent"], ["tools"], ["agent"]]
    out = cli("history", "agent-1", "--db", db).stdout
    assert out.count("by tools") == 2 and "by -" not in out
    audit = json.loads(cli("audit", "agent-1", "--json", "--db", db).stdout)
    assert {w["node"] for w in audit["writes"]} == {"__start__", "agent", "tools"}
    tools = next(t for t in audit["stats"]["tasks"] if t["node"] == "tools")
    assert tools["tasks"] == 3
    out = cli("audit", "agent-1", "--db", db).stdout + cli("audit", "--db", db).stdout
    assert "__pregel_push" not in out and " ? " not in out
    step1 = json.loads(cli("show", "agent-1", "step:1", "--json", "--db", db).stdout)
    assert {w["node"] for w in step1["pending_writes"]} == {"tools"}
    export = json.loads(cli("export", "--to", str(tmp_path / "pq"), "--json", "--db", db).stdout)
    nodes = pq.read_table(tmp_path / "pq" / "writes").column("node").to_pylist()
    assert len(nodes) == export["rows"]["writes"] and None not in nodes and nodes.count("tools") == 6


def test_messages_read_as_role_and_content(agent_db):
    db = str(agent_db)
    out = cli("show", "agent-1", "--db", db, columns=2000).stdout
    assert "human: weather in Paris, Rome and Oslo?" in out
    assert '→ get_weather({"city": "Paris"}) [call-1]' in out and "tool get_weather [call-1]: sunny in Paris" in out
    assert "ai: Paris is sunny" in out and "--full shows all" in out and LONG_ANSWER.strip() not in out.replace("\n", " ")
    full = cli("show", "agent-1", "--full", "--db", db, columns=2000).stdout
    assert LONG_ANSWER.strip() in full
    assert "(7 messages) last ai: Paris is sunny" in cli("latest", "messages", "--db", db, columns=2000).stdout
    # an AI message that only calls tools diffs as its tool calls, not as ""
    diff = cli("diff", "agent-1", "step:0", "step:1", "--db", db, columns=2000).stdout
    assert '+ ai: → get_weather({"city": "Paris"}) [call-1]' in diff and '""' not in diff
    assert '[call-2]' in diff


# --- 6. summaries that scale --------------------------------------------------------------------


@pytest.fixture(scope="module")
def many_threads(tmp_path_factory) -> Path:
    """400 threads of 4 checkpoints each (written through the saver)."""
    from langgraph.checkpoint.base import empty_checkpoint

    path = tmp_path_factory.mktemp("many") / "many.db"
    with open_saver(str(path)) as saver:
        for i in range(400):
            config = {"configurable": {"thread_id": f"user-{i:03d}", "checkpoint_ns": ""}}
            for step in range(4):
                cp = empty_checkpoint()
                cp["channel_values"] = {"count": step}
                cp["channel_versions"] = {"count": str(step + 1)}
                config = saver.put(config, cp, {"source": "loop", "step": step}, {"count": str(step + 1)})
    return path


def test_prune_dry_run_is_a_summary(many_threads):
    db = str(many_threads)
    out = cli("prune", "--keep-last", "1", "--dry-run", "--db", db).stdout
    assert len(out.splitlines()) <= 30 and "1200 checkpoint(s) in 400 thread(s)" in out and "--offset 20" in out
    verbose = cli("prune", "--keep-last", "1", "--dry-run", "--verbose", "--limit", "400", "--db", db).stdout
    assert len(verbose.splitlines()) >= 1200
    report = json.loads(cli("prune", "--keep-last", "1", "--dry-run", "--json", "--db", db).stdout)
    assert len(report["threads"]) == 400
    line = one_line_error(cli("prune", "--dry-run", "--db", db), 2, "--keep-last", "--older-than", "--idle")
    assert "keep_last" not in line and "idle_longer_than" not in line


def test_listings_page(many_threads):
    db = str(many_threads)
    first = json.loads(cli("threads", "--limit", "7", "--order", "thread_id", "--json", "--db", db).stdout)
    second = json.loads(cli("threads", "--limit", "7", "--offset", "7", "--order", "thread_id", "--json", "--db", db).stdout)
    assert [t["thread_id"] for t in first["threads"] + second["threads"]] == [f"user-{i:03d}" for i in range(14)]
    assert "more: --offset 7" in cli("threads", "--limit", "7", "--db", db).stdout
    latest = json.loads(cli("latest", "count", "--limit", "5", "--offset", "5", "--json", "--db", db).stdout)
    assert len(latest) == 5 and all(r["value"] == 3 for r in latest)
    globbed = json.loads(cli("latest", "count", "user-01*", "--json", "--limit", "100", "--db", db).stdout)
    assert [r["thread_id"] for r in globbed] == [f"user-{i:03d}" for i in range(10, 20)]
    assert "more: --offset 50" in cli("latest", "count", "--db", db).stdout
    hist = cli("history", "user-001", "--limit", "2", "--db", db).stdout
    assert "checkpoints (newest first) 1–2 of 4; more: --offset 2" in hist
    with_offset = cli("history", "user-001", "--limit", "2", "--offset", "2", "--db", db).stdout
    assert "step 0" in with_offset and "step 3" not in with_offset


def test_audit_pages(lg_db):
    db = str(lg_db)
    every = json.loads(cli("audit", "t-research", "--json", "--limit", "1000", "--db", db).stdout)["writes"]
    page = json.loads(cli("audit", "t-research", "--json", "--limit", "5", "--offset", "5", "--db", db).stdout)["writes"]
    assert page == every[5:10]
    assert "more: --offset 5" in cli("audit", "t-research", "--limit", "5", "--db", db).stdout


# --- 8. version, help, completion, docs ----------------------------------------------------------


def test_version_help_and_completion(lg_db):
    from importlib.metadata import version

    proc = cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"threadline {version('threadline')}"
    top = cli("--help").stdout
    commands = re.findall(r"^  (\w+) ", top.split("Commands:")[1], re.MULTILINE)
    assert {"threads", "history", "show", "prune", "import", "setup"} <= set(commands)
    for name in commands:  # the same app in-process (one process per command would only add start-up time) …
        _clean_help(name, CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "80"}).stdout)
    _clean_help("prune", cli("prune", "--help").stdout)  # … and the reported case as a real process
    # from bash, as a user runs it: the shell is detected from the process tree (so "; true",
    # which keeps bash from replacing itself with the command)
    shown = subprocess.run(["bash", "-c", f"{EXE} --show-completion; true"], capture_output=True, text=True, timeout=60)
    assert "_THREADLINE_COMPLETE" in shown.stdout, shown.stderr
    proc = subprocess.run([str(EXE)], capture_output=True, text=True,
                          env={"_THREADLINE_COMPLETE": "complete_bash", "COMP_WORDS": "threadline his", "COMP_CWORD": "1",
                               "PATH": "/usr/bin:/bin"})
    assert proc.stdout.split() == ["history"]
    proc = subprocess.run([str(EXE)], capture_output=True, text=True,
                          env={"_THREADLINE_COMPLETE": "complete_bash", "COMP_WORDS": "threadline show t-r", "COMP_CWORD": "2",
                               "PATH": "/usr/bin:/bin", "THREADLINE_DB": str(lg_db)})
    assert proc.stdout.split() == ["t-research"]


def _clean_help(name: str, text: str) -> None:
    assert text.startswith("Usage: threadline"), name
    options = [line for line in text.splitlines() if line.lstrip().startswith("-")]
    assert options and not any(re.search(r"<\w", line) for line in options), (name, text)
    assert "╭" not in text


def test_usage_errors_are_one_line():
    one_line_error(cli("show"), 2, "Missing argument 'THREAD'", "threadline show --help")
    one_line_error(cli("threads", "--limit", "0"), 2, "--limit")
    one_line_error(cli("threads", "--order", "size"), 2, "--order")
    one_line_error(cli("threads", "--idle", "soon"), 2, "not a duration")
    one_line_error(cli("nosuchcommand"), 2, "nosuchcommand")


def test_docs_are_written_for_users():
    text = (ROOT / "docs" / "cli.md").read_text()
    assert not re.search(r"[\u3000-\u9fff]", text), "untranslated text"
    for internal in ("seed", "_op", "ops.", "threadline.storage", "sans-IO"):
        assert internal not in text, internal
    for flag in ("--yes", "--full", "--verbose", "--debug", "--version", "HEAD~N", "step:N", "--limit", "--offset"):
        assert flag in text, flag
