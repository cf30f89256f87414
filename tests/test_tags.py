"""Tags and pins (issue 34 §2): a tagged checkpoint survives prune --keep-last 1, TTL expiry and the
sweeper and reads the same afterwards; a pinned thread survives retention and delete; names
resolve like ids; the CLI's bad input is one line, exit 2. SQLite and Postgres (and Redis, cheap)."""

from __future__ import annotations

import time

import pytest
from typer.testing import CliRunner

from life34_graphs import build, cfg, chat
from threadline import lifecycle as L
from threadline.cli import app
from threadline.errors import ConfigError, NotFoundError, UnsafeOperationError
from threadline.lifecycle import tags as T
from threadline.read import names
from threadline.storage import ops

KINDS = ("sqlite", "postgres")


def _values(g, thread_id, checkpoint_id):
    return g.get_state(cfg(thread_id, checkpoint_id)).values


@pytest.mark.parametrize("kind", KINDS)
def test_a_tagged_checkpoint_survives_prune_ttl_and_the_sweeper(kind, fresh_backend):
    b = fresh_backend(kind)
    with b.open(ttl={"default_ttl": 60, "refresh_on_read": False}, retention={"keep_last": 1}) as saver:
        g = chat(saver, "t", *[f"turn {i} " + "x" * 300 for i in range(5)])
        def delta_based(name):  # its messages stored as a delta on an older version: that base must stay
            version = saver.get_tuple(cfg("t", names.resolve_checkpoint(saver, "t", name))).checkpoint["channel_versions"]["messages"]
            return b.sql("SELECT base_version FROM threadline_blobs WHERE thread_id = ? AND channel = ? AND version = ?",
                         ("t", "messages", version))[0][0] is not None

        name = next(f"HEAD~{k}" for k in range(2, 12) if delta_based(f"HEAD~{k}"))
        golden = names.resolve_checkpoint(saver, "t", name)
        before = _values(g, "t", golden)
        tag = T.tag(saver, "t", name, "golden")
        assert tag.checkpoint_id == golden and names.resolve_checkpoint(saver, "t", "golden") == golden
        assert names.resolve_checkpoint(saver, "t", "golden^") == names.resolve_checkpoint(saver, "t", name + "^")
        report = L.prune(saver, L.RetentionPolicy(keep_last=1))
        assert report.checkpoints > 0
        kept = {cid for _, cid in b.stored("t")["checkpoints"]}
        assert golden in kept and len(kept) == 2  # the head and the tag
        assert _values(g, "t", golden) == before
        # TTL: the thread is long idle; the sweeper (TTL + retention) keeps it
        b.sql("UPDATE threadline_threads SET updated_at = ?, accessed_at = NULL WHERE thread_id = ?", (time.time() - 3600 * 24, "t"))
        swept = saver.sweep()
        assert swept.ran and swept.threads_expired == 0
        assert _values(g, "t", golden) == before
        # idle retention keeps the tagged checkpoint only (and what it needs)
        L.prune(saver, L.RetentionPolicy(idle_longer_than=60))
        assert {cid for _, cid in b.stored("t")["checkpoints"]} == {golden}
        assert _values(g, "t", golden) == before
        # untagged, it expires with the thread
        T.untag(saver, "t", "golden")
        assert saver.sweep().threads_expired == 1
        assert b.stored("t")["checkpoints"] == []


@pytest.mark.parametrize("kind", KINDS)
def test_a_pinned_thread_survives_retention_and_delete_unless_forced(kind, fresh_backend):
    b = fresh_backend(kind)
    with b.open() as saver:
        chat(saver, "p", "one", "two")
        chat(saver, "q", "one", "two")
        T.pin(saver, "p")
        before = b.stored("p")
        report = L.prune(saver, L.RetentionPolicy(idle_longer_than=0))
        assert report.threads_deleted == ["q"] and b.stored("p") == before
        head = names.resolve_checkpoint(saver, "p", "HEAD")
        with pytest.raises(UnsafeOperationError, match="pinned"):
            L.delete_checkpoint(saver, "p", head)
        assert L.delete_checkpoint(saver, "p", head, force=True).checkpoints
        T.tag(saver, "p", "HEAD", "keep")
        T.unpin(saver, "p")
        with pytest.raises(UnsafeOperationError, match="tagged"):
            L.delete_checkpoint(saver, "p", names.resolve_checkpoint(saver, "p", "keep"))
        forced = L.prune(saver, L.RetentionPolicy(idle_longer_than=0), force=True)
        assert forced.threads_deleted == ["p"] and T.listing(saver).tags == []
        with pytest.raises(NotFoundError):
            T.unpin(saver, "p")


@pytest.mark.parametrize("kind", (*KINDS, "redis"))
def test_tag_names_and_listing(kind, fresh_backend):
    b = fresh_backend(kind)
    with b.open() as saver:
        chat(saver, "t", "one")
        for bad in ("HEAD", "deadbeef", "12-34-56", "a b", "v1~2", "", "step:3"):
            with pytest.raises(ConfigError):
                T.tag(saver, "t", "HEAD", bad)
        chat(saver, "t", "two", "three")
        T.tag(saver, "t", "HEAD~4", "v1.0")
        kept = names.resolve_checkpoint(saver, "t", "v1.0")
        L.prune(saver, L.RetentionPolicy(keep_last=1))
        assert {cid for _, cid in b.stored("t")["checkpoints"]} == {kept, names.resolve_checkpoint(saver, "t", "HEAD")}
        with pytest.raises(ConfigError, match="already has a tag"):
            T.tag(saver, "t", "HEAD", "v1.0")
        with pytest.raises(NotFoundError, match="unknown thread"):
            T.tag(saver, "nope", "HEAD", "x")
        with pytest.raises(NotFoundError, match="no tag 'x'"):
            T.untag(saver, "t", "x")
        T.pin(saver, "t")
        from threadline.web import queries

        assert [r.tags for r in saver.run(queries.tree_op(saver.dialect, "t", ""))][0] == ["v1.0"]
        listing = T.listing(saver, "t")
        assert [t.name for t in listing.tags] == ["v1.0"] and [p[0] for p in listing.pins] == ["t"]
        saver.delete_thread("t")  # LangGraph's own delete takes the tags and pin along
        assert T.listing(saver).to_json() == {"tags": [], "pins": []}


def test_migration_10_applies_when_7_to_9_are_absent(tmp_path):
    import sqlite3

    from threadline import open_saver

    path = tmp_path / "old.db"
    with open_saver(str(path)) as saver:
        chat(saver, "t", "one")
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE threadline_tags")
    conn.execute("DROP TABLE threadline_pins")
    conn.execute("DELETE FROM threadline_migrations WHERE v >= 7")
    conn.commit()
    conn.close()
    with open_saver(str(path)) as saver:
        assert 10 in saver.run(ops.schema_state(saver.dialect)).applied
        T.tag(saver, "t", "HEAD", "golden")


def _cli(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def _one_line(result, code: int, *fragments: str) -> None:
    lines = [x for x in (result.stderr or result.output).splitlines() if x.strip()]
    assert result.exit_code == code, (result.exit_code, result.output)
    assert len(lines) == 1 and lines[0].startswith("error:"), lines
    for f in fragments:
        assert f in lines[0], (f, lines[0])


def test_cli_tags_pins_and_bad_input(tmp_path):
    from threadline import open_saver

    db = str(tmp_path / "t.db")
    with open_saver(db) as saver:
        chat(saver, "t", "one", "two")
    ok = _cli("tag", "t", "HEAD~2", "golden", "--db", db)
    assert ok.exit_code == 0 and "tagged" in ok.output
    assert "golden" in _cli("tags", "--db", db).output
    shown = _cli("show", "t", "golden", "--db", db)
    assert shown.exit_code == 0, shown.output
    assert "golden" in _cli("history", "t", "--db", db).output
    _one_line(_cli("untag", "t", "silver", "--db", db), 2, "no tag 'silver'")
    _one_line(_cli("tag", "nope", "HEAD", "x", "--db", db), 2, "unknown thread 'nope'")
    _one_line(_cli("tag", "t", "HEAD", "cafe01", "--db", db), 2, "reads as a checkpoint name")
    _one_line(_cli("show", "t", "silver", "--db", db), 2, "no checkpoint 'silver'")
    assert _cli("pin", "t", "--db", db).exit_code == 0
    pruned = _cli("prune", "--keep-last", "1", "--yes", "--db", db)
    assert pruned.exit_code == 0, pruned.output
    _one_line(_cli("delete", "t", "HEAD", "--yes", "--db", db), 1, "pinned", "--force")
    assert _cli("unpin", "t", "--db", db).exit_code == 0
    _one_line(_cli("unpin", "t", "--db", db), 2, "not pinned")


def test_fsck_finds_and_removes_a_tag_langgraphs_own_prune_left_dangling(tmp_path):
    from threadline import open_saver

    with open_saver(str(tmp_path / "f.db")) as saver:
        chat(saver, "t", "one", "two")
        T.tag(saver, "t", "HEAD~2", "old")
        saver.prune(["t"], strategy="keep_latest")  # LangGraph's API: knows nothing of tags
        found = [f for f in L.fsck(saver).findings if f.kind == "dangling_tag"]
        assert len(found) == 1 and "'old'" in found[0].detail
        L.fsck(saver, repair=True)
        assert T.listing(saver, "t").tags == [] and not L.fsck(saver).findings
