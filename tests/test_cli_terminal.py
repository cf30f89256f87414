"""The real ``threadline`` command in a pseudo-terminal of 80 columns (pexpect), as a person
sees it: colours on a terminal and off when piped, ids never broken across lines, and
the confirmation prompt of destructive commands."""

from __future__ import annotations

import json
import os
import re
import uuid

import pytest

from cli_support import EXE, TESTS, cli, sqlite_digest
from lifecycle_graphs import populate
from threadline import open_saver

pexpect = pytest.importorskip("pexpect")

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
THREAD = str(uuid.UUID(int=0xA96F3D18_0000_4000_8000_1234_5678_9ABC))  # a 36-character thread id


@pytest.fixture
def db(tmp_path) -> str:
    path = str(tmp_path / "tl.db")
    with open_saver(path) as saver:
        populate(saver)
    assert cli("fork", "t-research", "HEAD", "--to", THREAD, "--db", path).returncode == 0
    return path


def terminal(*args: str, columns: int = 80) -> "pexpect.spawn":
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR") and not k.startswith("THREADLINE_")}
    env.update({"TERM": "xterm-256color", "PYTHONPATH": str(TESTS)})
    return pexpect.spawn(str(EXE), list(args), dimensions=(50, columns), env=env, encoding="utf-8", timeout=180)


def screen(child: "pexpect.spawn") -> tuple[str, int]:
    """Everything the command printed (colour codes removed) and its exit status."""
    text = child.read()
    child.close()
    return ANSI.sub("", text).replace("\r\n", "\n"), child.exitstatus


def test_what_a_person_sees_at_80_columns(db):
    child = terminal("threads", "--db", db)
    raw = child.read()
    child.close()
    assert child.exitstatus == 0 and ANSI.search(raw), "colours on a terminal"
    seen = ANSI.sub("", raw).replace("\r\n", "\n")
    lines = seen.splitlines()
    assert max(len(line) for line in lines) <= 80
    page = json.loads(cli("threads", "--json", "--db", db).stdout)
    for t in page["threads"]:
        row = next(line for line in lines if line.startswith(t["thread_id"]))  # the id whole, at the start of its row
        assert t["head_checkpoint_id"][-8:] in row
    header = next(line for line in lines if line.startswith("thread_id"))
    assert "checkpoints" in header.split()
    piped = cli("threads", "--db", db)
    assert piped.returncode == 0 and not ANSI.search(piped.stdout + piped.stderr), "no colours when piped"

    seen, status = screen(terminal("history", "t-research", "--subgraphs", "--db", db))
    assert status == 0
    hist = json.loads(cli("history", "t-research", "--subgraphs", "--json", "--db", db).stdout)
    for nodes in hist["namespaces"].values():
        for n in nodes:
            assert re.search(rf"\b{n['checkpoint_id'][-8:]}\b", seen), n["checkpoint_id"]
    seen, status = screen(terminal("audit", THREAD, "--db", db))
    assert status == 0 and THREAD in seen
    seen, status = screen(terminal("show", "t-answer", "--db", db))
    assert status == 0 and "human: hello there" in seen and "HEAD" in seen


def test_prune_asks_before_deleting(db):
    before = sqlite_digest(db)
    child = terminal("prune", "--keep-last", "2", "--db", db)
    child.expect(r"Delete (\d+) checkpoint\(s\) from (\d+) thread\(s\), freeing .*\? \[y/N\]: ")
    planned = int(child.match.group(1))
    preview = ANSI.sub("", child.before)
    assert "would delete" in preview and "t-research" in preview
    child.sendline("n")
    seen, status = screen(child)
    assert status == 1 and "nothing changed" in seen and sqlite_digest(db) == before

    child = terminal("prune", "--keep-last", "2", "--db", db)
    child.expect(r"\[y/N\]: ")
    child.sendline("y")
    seen, status = screen(child)
    assert status == 0 and f"{planned} checkpoint(s)" in seen and "freed" in seen
    assert json.loads(cli("prune", "--keep-last", "2", "--dry-run", "--json", "--db", db).stdout)["checkpoints"] == 0


def test_delete_asks_before_deleting(db):
    head = json.loads(cli("show", "t-answer", "--json", "--db", db).stdout)["checkpoint_id"]
    child = terminal("delete", "t-answer", "HEAD", "--db", db)
    child.expect(r"Delete 1 checkpoint\(s\) of t-answer, freeing .*\? \[y/N\]: ")
    assert head[-8:] in ANSI.sub("", child.before)
    child.sendline("y")
    seen, status = screen(child)
    assert status == 0 and "deleted" in seen
    assert json.loads(cli("show", "t-answer", "--json", "--db", db).stdout)["checkpoint_id"] != head
