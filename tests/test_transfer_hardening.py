"""Issue 27, findings 5, 6, 11 and 13: archives, bundles and output paths under attack.

5. An archive whose ``threadline_*`` objects are views (a recursive view in a tiny file),
   a named pipe, a value beyond the limits: ``restore`` / ``bundle-import`` refuse each at
   once, before the target is touched; a thread whose verification fails is rolled back.
6. ``bundle-export --redact CH`` leaves none of CH's value in the bundle — not in Send
   arguments (``__pregel_tasks``, channel and pending writes), interrupt payloads, resume
   values or the pending sends of old checkpoints — and the imported thread is the same
   thread: same ``next`` at every checkpoint, a finished run stays finished.
11. ``backup``, ``bundle-export`` and ``export`` refuse an output path that is a symlink.
13. A password in a database URL is masked in the ``threadline import`` suggestion.
"""

from __future__ import annotations

import json
import operator
import os
import sqlite3
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt

from cli_support import cli, one_line_error
from threadline import limits, open_saver
from threadline import read as H
from threadline.errors import ConfigError, NotADatabaseError
from threadline.transfer import backup as B
from threadline.transfer.bundle import REDACTED, bundle
from threadline.transfer.export import export_parquet

SECRET = "TOPSECRET-"


class S(TypedDict, total=False):
    secret: str
    out: Annotated[list, operator.add]


def _fan(state: S) -> list[Send]:
    return [Send("work", {"secret": state["secret"], "n": i}) for i in range(2)]


def _work(state: dict) -> dict:
    return {"out": [f"w{state['n']}"]}


def _ask(state: S) -> dict:
    interrupt({"check": state["secret"]})  # the answer (a resume value) is kept nowhere else
    return {"out": ["answered"]}


def build(checkpointer: Any):
    """start → two Send tasks carrying ``secret`` → an interrupt whose payload quotes it."""
    b = StateGraph(S)
    b.add_node("start", lambda s: {})
    b.add_node("work", _work)
    b.add_node("ask", _ask)
    b.add_edge(START, "start")
    b.add_conditional_edges("start", _fan, ["work"])
    b.add_edge("work", "ask")
    b.add_edge("ask", END)
    return b.compile(checkpointer=checkpointer)


def cfg(thread_id: str) -> dict:
    return {"configurable": {"thread_id": thread_id}}


def run_threads(saver: Any) -> None:
    """``done``: finished (interrupt answered); ``waiting``: stopped at the interrupt."""
    g = build(saver)
    g.invoke({"secret": SECRET + "1"}, cfg("done"))
    g.invoke(Command(resume=SECRET + "answer"), cfg("done"))
    g.invoke({"secret": SECRET + "2"}, cfg("waiting"))


def nexts(saver: Any, thread_id: str) -> list[tuple]:
    return [(s.config["configurable"]["checkpoint_id"], s.next) for s in build(saver).get_state_history(cfg(thread_id))]


def strings(value: Any) -> list[str]:
    """Every string in a value as ``read.jsonable`` renders it."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in strings(k) + strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in strings(v)]
    return []


def every_loaded(saver: Any) -> Any:
    return [H.jsonable((t.checkpoint, t.metadata, t.pending_writes)) for t in saver.list(None)]


# --- 6. redaction covers every place a channel's value travels ------------------------------------


def test_redacted_bundle_holds_no_copy_of_the_channel_and_imports_the_same_thread(sync_backend, tmp_path):
    path = str(tmp_path / "bug.bundle")
    with sync_backend.open() as saver:
        run_threads(saver)
        before = {t: nexts(saver, t) for t in ("done", "waiting")}
        waiting = build(saver).get_state(cfg("waiting"))
        bundle(saver, ["done", "waiting"], path, redact=["secret"])
    assert SECRET.encode() not in Path(path).read_bytes()
    with open_saver(str(tmp_path / "elsewhere.db")) as other:
        report = B.restore(other, path)
        assert report.ok and report.redacted == ["__start__", "secret"]
        # nowhere in a loaded checkpoint: values, Send arguments, pending writes, interrupts
        leaks = [s for s in strings(every_loaded(other)) if SECRET in s]
        assert not leaks
        # the same thread: the same next tasks at every checkpoint; the interrupt keeps its id
        assert {t: nexts(other, t) for t in ("done", "waiting")} == before
        g = build(other)
        state = g.get_state(cfg("waiting"))
        assert state.next == ("ask",) and [i.id for i in state.interrupts] == [i.id for i in waiting.interrupts]
        assert [i.value for i in state.interrupts] == [REDACTED]
        sends = [w for t in other.list(cfg("done")) for w in t.pending_writes if w[1] == "__pregel_tasks"]
        assert sends and {(s[2].node, s[2].arg) for s in sends} == {("work", REDACTED)}
        # a finished run stays finished: invoke(None) runs no node again
        count = len(list(other.list(cfg("done"))))
        g.invoke(None, cfg("done"))
        assert len(list(other.list(cfg("done")))) == count


def test_redaction_covers_pending_sends_of_old_checkpoints(tmp_path):
    """A LangGraph < v4 checkpoint keeps its Send packets in ``pending_sends``."""
    path = str(tmp_path / "old.bundle")
    with open_saver(str(tmp_path / "src.db")) as saver:
        ck = {**empty_checkpoint(), "v": 1, "pending_sends": [Send("work", {"secret": SECRET + "old"})]}
        saver.put({"configurable": {"thread_id": "old", "checkpoint_ns": ""}}, ck, {"source": "loop", "step": 0}, {})
        bundle(saver, ["old"], path, redact=["secret"])
    with open_saver(str(tmp_path / "dst.db")) as other:
        assert B.restore(other, path).ok
        [t] = list(other.list(None))
        assert [(s.node, s.arg) for s in t.checkpoint["pending_sends"]] == [("work", REDACTED)]


def test_bundle_import_reports_the_redaction(tmp_path):
    source, path, target = str(tmp_path / "src.db"), str(tmp_path / "b.bundle"), str(tmp_path / "t.db")
    with open_saver(source) as saver:
        run_threads(saver)
    assert cli("bundle-export", "done", "--to", path, "--redact", "secret", "--db", source).returncode == 0
    shown = cli("bundle-import", path, "--db", target, env={"COLUMNS": "200"})
    assert shown.returncode == 0 and "identical to the bundle (redacted: __start__, secret)" in shown.stdout


# --- 5. archives: only plain tables, regular files, bounded values; failed verification rolls back --


def _archive(tmp_path: Path) -> str:
    path = str(tmp_path / "good.bundle")
    with open_saver(str(tmp_path / "src.db")) as saver:
        run_threads(saver)
        bundle(saver, ["done"], path)
    return path


RECURSIVE = (
    "CREATE VIEW threadline_blobs AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
    "SELECT 'done' AS thread_id, '' AS checkpoint_ns, 'c' || n AS channel, 'v' AS version, 'msgpack' AS type, "
    "zeroblob(1 << 20) AS blob, NULL AS base_version FROM r"
)


@pytest.mark.parametrize("command", ["restore", "bundle-import"])
def test_archive_whose_tables_are_views_is_refused_at_once(tmp_path, command):
    path = _archive(tmp_path)
    conn = sqlite3.connect(path)
    conn.executescript(f"DROP TABLE threadline_blobs; {RECURSIVE};")
    conn.close()
    target = tmp_path / "target.db"
    proc = cli(command, path, "--db", str(target), timeout=60)
    one_line_error(proc, 2, "threadline_blobs", "is a view", "not a threadline archive")
    assert not target.exists()
    with open_saver(str(tmp_path / "lib.db")) as saver, pytest.raises(ConfigError, match="threadline_blobs.*is a view"):
        B.restore(saver, path)


def test_archive_that_is_a_named_pipe_is_refused(tmp_path):
    fifo = tmp_path / "pipe.bundle"
    os.mkfifo(fifo)
    target = tmp_path / "target.db"
    one_line_error(cli("bundle-import", str(fifo), "--db", str(target), timeout=60), 2, "not a regular file")
    assert not target.exists()
    with open_saver(str(tmp_path / "lib.db")) as saver, pytest.raises(NotADatabaseError, match="not a regular file"):
        B.restore(saver, str(fifo))


def test_archive_value_beyond_the_limit_is_refused(tmp_path):
    path = _archive(tmp_path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE threadline_blobs SET blob = zeroblob(4096) WHERE channel = (SELECT max(channel) FROM threadline_blobs)")
    conn.commit()
    conn.close()
    with open_saver(str(tmp_path / "lib.db")) as saver, limits.override(max_value_bytes=1024):
        with pytest.raises(ConfigError, match="larger than max_value_bytes"):
            B.restore(saver, path)
        assert not list(saver.list(None))


def test_restore_whose_verification_fails_keeps_the_target_as_it_was(tmp_path):
    path = _archive(tmp_path)
    with open_saver(str(tmp_path / "target.db")) as saver:
        assert B.restore(saver, path).ok
        before = every_loaded(saver)
        # the archive's newest checkpoint: metadata edited, its checksum left as it was
        conn = sqlite3.connect(path)
        conn.execute("UPDATE threadline_checkpoints SET metadata = json_set(metadata, '$.step', 99) "
                     "WHERE checkpoint_id = (SELECT max(checkpoint_id) FROM threadline_checkpoints)")
        conn.commit()
        conn.close()
        report = B.restore(saver, path, replace=True)
        assert not report.ok and "thread not restored" in report.threads[0].problems[0]
        assert every_loaded(saver) == before  # the thread that was there, unchanged and loading


# --- 11. no output through a symlink ---------------------------------------------------------------


def test_outputs_refuse_a_symlinked_target(tmp_path):
    source = str(tmp_path / "src.db")
    with open_saver(source) as saver:
        run_threads(saver)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "out.db"
    link.symlink_to(elsewhere / "victim.db")
    for args in (("backup", "--to", str(link)), ("bundle-export", "done", "--to", str(link))):
        for extra in ((), ("--overwrite",)):
            one_line_error(cli(*args, *extra, "--db", source), 2, str(link), "symbolic link")
    with open_saver(source) as saver:
        with pytest.raises(ConfigError, match="symbolic link"):
            B.backup(saver, str(link))
        with pytest.raises(ConfigError, match="symbolic link"):
            bundle(saver, ["done"], str(link), overwrite=True)
        # a WAL file planted beside the output is a way in too
        wal = tmp_path / "fresh.db-wal"
        wal.symlink_to(elsewhere / "victim-wal")
        with pytest.raises(ConfigError, match="symbolic link"):
            B.backup(saver, str(tmp_path / "fresh.db"))
        # export: the directory, or one of the table directories it replaces
        out_link = tmp_path / "parquet"
        out_link.symlink_to(elsewhere)
        one_line_error(cli("export", "--to", str(out_link), "--db", source), 2, "symbolic link")
        real = tmp_path / "real"
        real.mkdir()
        (real / "checkpoints").symlink_to(elsewhere)
        with pytest.raises(ConfigError, match="symbolic link"):
            export_parquet(saver, str(real))
    assert list(elsewhere.iterdir()) == []


# --- 13. no password in the suggested import command --------------------------------------------------


def test_import_suggestion_masks_the_password(pg_url):
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(pg_url) as official:
        official.setup()
    url = pg_url.replace("postgresql://postgres@", "postgresql://postgres:s3cret-user@") + "&password=s3cret-param"
    assert "s3cret-user" in url
    proc = cli("stats", "--db", url)
    line = one_line_error(proc, 2, "threadline import", "//***@", "password=***")
    assert "s3cret" not in proc.stdout + proc.stderr, line
