"""Backup → restore → every thread identical, across backends; thread bundles with redaction;
the CLI commands (threadline.transfer.backup, threadline.transfer.bundle)."""

from __future__ import annotations

import json

import pytest

from threadline.errors import NotADatabaseError
from typer.testing import CliRunner

from lifecycle_graphs import build_graph, cfg
from threadline import open_saver
from threadline import lifecycle as L
from threadline import read as H
from threadline.cli import app
from threadline.errors import ConfigError
from threadline.lifecycle.thread_rows import comparable_rows
from threadline.transfer import backup as B
from threadline.transfer.bundle import REDACTED, bundle


def every_tuple(saver) -> dict:
    """Every checkpoint of every thread loaded, as comparable data."""
    out = {}
    for t in saver.list(None):
        c = t.config["configurable"]
        out[(c["thread_id"], c["checkpoint_ns"], c["checkpoint_id"])] = H.jsonable(
            (t.checkpoint, t.metadata, t.parent_config and t.parent_config["configurable"]["checkpoint_id"], t.pending_writes)
        )
    return out


@pytest.mark.parametrize("target_kind", ["sqlite", "postgres"])
def test_backup_then_restore_every_thread_identical(db, fresh_backend, tmp_path, target_kind):
    source, _ = db
    archive = str(tmp_path / "backup.db")
    with open_saver(source.url) as saver:
        L.rollback(saver, "t-answer", H.thread_history(saver, "t-answer").ordered()[1].checkpoint_id)
        before = every_tuple(saver)
        report = B.backup(saver, archive)
        assert report.method == ("rows" if source.is_postgres else "vacuum-into")
        assert report.threads == 3 and report.rows["checkpoints"] == len(before) and report.bytes > 0
        with pytest.raises(ConfigError, match="already exists"):
            B.backup(saver, archive)
    target = fresh_backend(target_kind)
    with open_saver(target.url) as saver:
        restored = B.restore(saver, archive)
        assert restored.ok and restored.verified and len(restored.threads) == 3
        assert every_tuple(saver) == before
        # the graph resumes the restored interrupted thread
        assert build_graph(saver).get_state(cfg("t-interrupt")).interrupts
        assert L.fsck(saver, deep=True).ok
        # every stored row is there too (JSON compared as data)
        for table in ("checkpoints", "blobs", "writes"):
            got, want = (comparable_rows(b.sql(f"SELECT * FROM threadline_{table}")) for b in (target, source))
            if table == "checkpoints" and target.is_postgres and not source.is_postgres:
                # an x3 checksum covers the JSON text SQLite keeps; JSONB keeps no text, so the restore
                # checked it and gave the row a checksum of its parsed JSON (``c3:``, the last column)
                assert {r[-1][:3] for r in got} == {"c3:"} and {r[-1][:3] for r in want} == {"x3:"}
                got, want = [r[:-1] for r in got], [r[:-1] for r in want]
            assert got == want, table
        # a second restore refuses before writing anything, unless told to replace
        rows = target.snapshot()
        with pytest.raises(ConfigError, match="already exist"):
            B.restore(saver, archive)
        assert target.snapshot() == rows
        again = B.restore(saver, archive, thread_ids=["t-answer"], replace=True)
        assert again.ok and [t.thread_id for t in again.threads] == ["t-answer"]
        assert every_tuple(saver) == before


def test_restore_refuses_what_is_not_an_archive(tmp_path):
    other = tmp_path / "other.db"
    import sqlite3

    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    with open_saver(str(tmp_path / "t.db")) as saver:
        with pytest.raises(ConfigError, match="not a threadline"):
            B.restore(saver, str(other))
        with pytest.raises(NotADatabaseError, match="does not exist"):
            B.restore(saver, str(tmp_path / "missing.db"))


def test_bundle_with_redaction_imports_elsewhere(db, tmp_path):
    source, _ = db
    path = str(tmp_path / "bug.bundle")
    with open_saver(source.url) as saver:
        before = every_tuple(saver)
        report = bundle(saver, ["t-answer", "t-interrupt"], path, redact=["messages", "notes"])
        assert report.threads == ["t-answer", "t-interrupt"] and report.redacted == ["__start__", "messages", "notes"]
        with pytest.raises(ConfigError, match="no such thread"):
            bundle(saver, ["nope"], str(tmp_path / "x.bundle"))
    raw = open(path, "rb").read()
    assert b"hello there" not in raw and b"please approve" not in raw  # the messages' text never left
    with open_saver(str(tmp_path / "elsewhere.db")) as other:
        imported = B.restore(other, path)
        assert imported.ok and {t.thread_id for t in imported.threads} == {"t-answer", "t-interrupt"}
        after = every_tuple(other)
        assert set(after) == {k for k in before if k[0] in ("t-answer", "t-interrupt")}
        for key, (checkpoint, metadata, parent, writes) in after.items():
            values = checkpoint["channel_values"]
            if "messages" in values:
                assert values["messages"] == REDACTED
            assert (checkpoint["channel_versions"], parent) == (before[key][0]["channel_versions"], before[key][2])
        state = build_graph(other).get_state(cfg("t-answer")).values
        assert state["messages"] == REDACTED and state["route"] == "answer"


def test_cli_backup_restore_bundle_vacuum_sweep(db, tmp_path):
    source, _ = db
    runner = CliRunner()

    def js(*args):
        result = runner.invoke(app, [*args, "--json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    archive, bundle_file, target = str(tmp_path / "b.db"), str(tmp_path / "t.bundle"), str(tmp_path / "target.db")
    assert js("backup", "--to", archive, "--db", source.url)["threads"] == 3
    restored = js("restore", archive, "--db", target)
    assert restored["ok"] and len(restored["threads"]) == 3
    assert runner.invoke(app, ["restore", archive, "--db", target]).exit_code == 2  # threads exist: an input error
    assert js("bundle-export", "t-research", "--to", bundle_file, "--redact", "notes", "--db", source.url)["redacted"] == ["__start__", "notes"]
    assert js("bundle-import", bundle_file, "--replace", "--db", target)["ok"]
    swept = js("sweep", "--keep-last", "2", "--db", target)
    assert swept["ran"] and swept["checkpoints_deleted"] > 0 and swept["space"]["bytes_after"] is not None
    space = js("vacuum", "--db", target)
    assert space["bytes_before"] >= space["bytes_after"] > 0 and not space["needs_full"]


def test_restore_of_a_missing_or_foreign_source_creates_no_target(tmp_path):
    """restore and bundle-import check their source read-only before the target is opened."""
    from cli_support import cli, one_line_error

    (tmp_path / "notadb.db").write_text("hello")
    target = tmp_path / "target.db"
    one_line_error(cli("restore", str(tmp_path / "missing.db"), "--db", str(target)), 2, "does not exist")
    one_line_error(cli("restore", str(tmp_path / "notadb.db"), "--db", str(target)), 2, "not a SQLite database")
    one_line_error(cli("bundle-import", str(tmp_path / "missing.bundle"), "--db", str(target)), 2, "does not exist")
    assert not target.exists()
