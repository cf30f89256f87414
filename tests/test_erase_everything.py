"""Erasure leaves nothing behind (issue 42, findings 2 and 3): cold threads (moved whole to the
object store by ``tier``) are selected by id pattern and by metadata as warm ones are, their
archives and stubs deleted; every object the erased threads' rows name is deleted now — unless
another thread still names it — and the receipt counts rows, cold archives and objects, verified
gone. Real LangGraph graphs on SQLite and Postgres, a local directory and an S3-compatible server
(moto_server); the command as a user runs it; Redis (no object store there). Also finding 8's
``tier`` on Redis with ``THREADLINE_OFFLOAD`` set."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from cli_support import cli, one_line_error
from offload_support import files_graph
from test_offload import SMALL, _put_chain, db_url, s3, store_url  # noqa: F401 (fixtures: SQLite and Postgres; file and S3)
from threadline.backends import open_saver
from threadline.codec import BlobCodec, Keyring
from threadline.errors import ConfigError
from threadline.lifecycle import erase as E
from threadline.lifecycle import objects as O
from threadline.lifecycle.cold import cold_archives_op, tier
from threadline.lifecycle.fsck import fsck
from threadline.objectstore import Offload, open_store
from threadline.read import list_threads


def _codec(url: str) -> BlobCodec:
    return BlobCodec(offload=Offload(url, min_bytes=SMALL))


def _run(saver, tid: str, *, user: str, steps: int, seed: int = 7) -> None:
    """A real graph whose ``files`` channel holds values above ``min_bytes``: offloaded. The same
    seed writes the same files, so two threads of one seed share objects (content addressing)."""
    cfg = {"configurable": {"thread_id": tid}, "metadata": {"user": user}, "recursion_limit": 50}
    files_graph(saver, steps=steps, size=3 * SMALL, seed=seed).invoke({"files": {}, "step": 0}, cfg)


def _state(saver, tid: str) -> dict:
    return files_graph(saver, steps=1, size=1).get_state({"configurable": {"thread_id": tid}}).values


def _fill(saver) -> dict[str, dict]:
    """user-5-a cold; user-5-b warm; user-6-a shares user-5-b's first objects; user-6-b its own."""
    _run(saver, "user-5-a", user="u5", steps=4, seed=1)
    assert tier(saver, 0).threads == ["user-5-a"]
    _run(saver, "user-5-b", user="u5", steps=7)
    _run(saver, "user-6-a", user="u6", steps=4)
    _run(saver, "user-6-b", user="u6", steps=4, seed=3)
    return {t: _state(saver, t) for t in ("user-6-a", "user-6-b")}


def _objects(url: str) -> set[str]:
    return {name for name, _, _ in open_store(url).list()}


def test_erase_takes_cold_threads_archives_and_objects(db_url, store_url, tmp_path):  # noqa: F811
    with open_saver(db_url, codec=_codec(store_url)) as s:
        others = _fill(s)
        archive = s.run(cold_archives_op(s.dialect, ["user-5-a"]))["user-5-a"]
        named = O.collect(s, delete=False).named
        mine = {n for n, rows in named.items() if all("user-5-" in r for r in rows)}
        shared = {n for n, rows in named.items() if any("user-5-" in r for r in rows) and any("user-6-a" in r for r in rows)}
        assert archive in mine and len(mine) > 1 and shared  # the setup: objects of its own, and shared ones
        # user-5-a's objects from before it was archived: named by no row, holding its values still
        mine |= set(O.collect(s, delete=False).orphans)
        assert len(mine) > 3

        preview = E.erase(s, E.Selection("user-5-*"), dry_run=True)
        assert preview.threads == ["user-5-a", "user-5-b"] and preview.cold_archives == 1 and preview.objects == len(mine) - 1
        assert _objects(store_url) >= mine  # a dry run deletes nothing

        r = E.erase(s, E.Selection("user-5-*"), receipt=str(tmp_path / "r.json"), database="test")
        assert r.status == "complete" and not r.problems, r.problems
        assert r.threads == ["user-5-a", "user-5-b"] and r.cold_archives == 1 and r.objects == len(mine) - 1
        assert r.verified == {"threads": [], "store_items": 0, "objects": 0}
        # gone: the archive, every object only user-5's rows named; kept: those user-6-a names too
        left = _objects(store_url)
        assert not (left & mine) and shared <= left
        assert s.get_tuple({"configurable": {"thread_id": "user-5-a"}}) is None  # nothing to restore
        assert {t.thread_id for t in list_threads(s).threads} == {"user-6-a", "user-6-b"}
        assert not s.run(cold_archives_op(s.dialect, ["user-5-a"]))
        assert {t: _state(s, t) for t in others} == others
        found = O.collect(s, delete=False)
        assert not found.orphans and not found.missing
        assert not [f for f in fsck(s).findings if f.kind in ("orphan_object", "missing_object")]
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["counts"]["cold_archives"] == 1 and doc["counts"]["objects"] == len(mine) - 1
    assert doc["bytes"]["objects"] > 0 and doc["bytes"]["cold_archives"] > 0


def test_erase_by_metadata_reads_cold_archives(db_url, tmp_path):  # noqa: F811
    url = f"file://{tmp_path / 'objects'}"
    with open_saver(db_url, codec=_codec(url)) as s:
        _fill(s)
        r = E.erase(s, E.Selection(where={"user": "u5"}))
        assert r.threads == ["user-5-a", "user-5-b"] and r.cold_archives == 1 and not r.problems
        assert {t.thread_id for t in list_threads(s).threads} == {"user-6-a", "user-6-b"}
        assert not O.collect(s, delete=False).orphans


def test_a_cold_thread_with_a_new_tree_is_erased_whole(db_url, tmp_path):  # noqa: F811
    url = f"file://{tmp_path / 'objects'}"
    with open_saver(db_url, codec=_codec(url)) as s:
        _run(s, "user-5-a", user="u5", steps=4)
        tier(s, 0)
        _put_chain(s, "user-5-a", n=2, size=SMALL)  # a new tree on the id (no parent: no restore): rows and a stub
        assert s.run(cold_archives_op(s.dialect, ["user-5-a"])) and list_threads(s).threads[0].checkpoint_count == 2
        r = E.erase(s, E.Selection("user-5-a"))
        assert r.threads == ["user-5-a"] and r.cold_archives == 1 and r.rows["checkpoints"] > 0 and not r.problems
        assert _objects(url) == set() and s.get_tuple({"configurable": {"thread_id": "user-5-a"}}) is None


def test_erase_needs_the_object_store_of_what_it_names(db_url, tmp_path):  # noqa: F811
    url = f"file://{tmp_path / 'objects'}"
    with open_saver(db_url, codec=_codec(url)) as s:
        _fill(s)
    with open_saver(db_url, codec=BlobCodec()) as plain:
        for sel in (E.Selection("user-5-a"), E.Selection("user-5-b")):
            with pytest.raises(ConfigError, match="THREADLINE_OFFLOAD"):
                E.erase(plain, sel)
        assert E.erase(plain, E.Selection("user-7-*")).threads == []  # naming nothing offloaded needs no store
    with open_saver(db_url, codec=_codec(url)) as s:
        assert {t.thread_id for t in list_threads(s).threads} == {"user-5-a", "user-5-b", "user-6-a", "user-6-b"}


def test_cli_erases_a_cold_thread_after_tier(tmp_path):
    db, receipt = str(tmp_path / "db.sqlite"), tmp_path / "r.json"
    env = {"THREADLINE_OFFLOAD": f"file://{tmp_path / 'objects'}?min_bytes={SMALL}"}
    with open_saver(db, codec=_codec(f"file://{tmp_path / 'objects'}")) as s:
        _run(s, "user-5-a", user="u5", steps=4)
    assert cli("tier", "--idle", "0s", "--db", db, env=env).returncode == 0
    with open_saver(db, codec=_codec(f"file://{tmp_path / 'objects'}")) as s:
        _run(s, "user-6-a", user="u6", steps=4, seed=3)
    one_line_error(cli("erase", "--db", db, "--thread-pattern", "user-5-*", "--yes"), 2, "'user-5-a'", "THREADLINE_OFFLOAD")
    preview = cli("erase", "--db", db, "--thread-pattern", "user-5-*", "--dry-run", env=env, columns=300)
    assert preview.stdout.startswith("would erase 1 thread(s)") and "1 cold archive(s)" in preview.stdout
    done = cli("erase", "--db", db, "--thread-pattern", "user-5-*", "--receipt", str(receipt), "--yes", env=env, columns=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("erased 1 thread(s)") and "1 cold archive(s)" in done.stdout and "verified" in done.stdout
    doc = json.loads(receipt.read_text())
    assert doc["status"] == "complete" and doc["counts"]["cold_archives"] == 1 and doc["verified"]["objects"] == 0
    listed = json.loads(cli("threads", "--db", db, "--json", env=env).stdout)["threads"]
    assert [t["thread_id"] for t in listed] == ["user-6-a"]
    assert not list((tmp_path / "objects" / "v1" / "cold").glob("*"))
    with open_saver(db, codec=_codec(f"file://{tmp_path / 'objects'}")) as s:
        assert not O.collect(s, delete=False).orphans


def test_redis_receipt_counts_every_kind(redis_target):
    url = f"{redis_target.url}{'&' if '?' in redis_target.url else '?'}prefix={redis_target.prefix}"
    with open_saver(url) as s:
        _run(s, "user-5-a", user="u5", steps=2)
        _run(s, "user-6-a", user="u6", steps=2)
        r = E.erase(s, E.Selection("user-5-*"))
        assert r.threads == ["user-5-a"] and (r.cold_archives, r.objects) == (0, 0) and not r.problems
        assert r.verified == {"threads": [], "store_items": 0, "objects": 0}
        assert [t.thread_id for t in list_threads(s).threads] == ["user-6-a"]


def test_tier_on_redis_says_it_has_no_cold_tier(redis_target, tmp_path):
    url = f"{redis_target.url}{'&' if '?' in redis_target.url else '?'}prefix={redis_target.prefix}"
    with open_saver(url) as s:
        _run(s, "user-5-a", user="u5", steps=2)
    env = {"THREADLINE_OFFLOAD": f"file://{tmp_path / 'objects'}"}
    for dry in ((), ("--dry-run",)):
        proc = cli("tier", "--idle", "1d", "--db", url, *dry, env=env)
        proc.stderr = "\n".join(line for line in proc.stderr.splitlines() if "persistence is off" not in line)  # the test server's
        one_line_error(proc, 2, "the cold tier is not supported on redis")


def test_an_interrupted_erasure_finishes_its_objects(db_url, tmp_path, monkeypatch):  # noqa: F811
    url, receipt = f"file://{tmp_path / 'objects'}", str(tmp_path / "r.json")
    with open_saver(db_url, codec=_codec(url)) as s:
        _fill(s)
        stored = _objects(url)
        real = E.erase_thread_op

        def dies(d, tid, bc):
            raise ConnectionError("the server went away")

        monkeypatch.setattr(E, "erase_thread_op", dies)  # after user-5-a's objects, before its rows
        with pytest.raises(ConnectionError):
            E.erase(s, E.Selection("user-5-*"), receipt=receipt)
        first = json.loads(open(receipt).read())
        assert first["status"] == "incomplete" and first["counts"]["cold_archives"] == 1 and first["threads"] == []
        monkeypatch.setattr(E, "erase_thread_op", real)
        r = E.erase(s, E.Selection("user-5-*"), receipt=receipt)
        assert r.status == "complete" and not r.problems and r.threads == ["user-5-a", "user-5-b"]
        assert r.cold_archives == 1 and r.objects > first["counts"]["objects"]  # each object counted once
        assert len(stored) - len(_objects(url)) == r.cold_archives + r.objects
        assert not O.collect(s, delete=False).orphans


def test_encrypted_objects_are_found_and_erased(tmp_path):
    url = f"file://{tmp_path / 'objects'}"
    codec = BlobCodec(keys=Keyring([os.urandom(32)]), offload=Offload(url, min_bytes=SMALL))
    with open_saver(str(tmp_path / "db.sqlite"), codec=codec) as s:
        others = _fill(s)
        assert all(n.startswith("v1/k") or n.startswith("v1/cold/") for n in _objects(url))  # keyed names
        r = E.erase(s, E.Selection("user-5-*"))
        assert r.cold_archives == 1 and r.objects > 1 and r.kept_objects > 0 and not r.problems
        assert not O.collect(s, delete=False).orphans and {t: _state(s, t) for t in others} == others


def test_an_unreadable_reference_elsewhere_keeps_the_objects(tmp_path):
    db, url = tmp_path / "db.sqlite", f"file://{tmp_path / 'objects'}"
    with open_saver(str(db), codec=_codec(url)) as s:
        _fill(s)
        before = _objects(url)
    conn = sqlite3.connect(db)  # damage the offloaded rows of another user's thread
    conn.execute("UPDATE threadline_blobs SET blob = zeroblob(40) WHERE thread_id = 'user-6-b' AND type LIKE '%+obj+%'")
    conn.commit()
    conn.close()
    with open_saver(str(db), codec=_codec(url)) as s:
        r = E.erase(s, E.Selection("user-5-b"))  # its rows go; none of its objects may be proven unnamed
        assert r.threads == ["user-5-b"] and r.objects == 0 and r.kept_objects > 0 and _objects(url) == before
        assert len(r.problems) == 1 and "1 object(s) of the erased threads kept" in r.problems[0] and "user-6-b" in r.problems[0]
        r = E.erase(s, E.Selection("user-5-a"))  # a cold archive is named by its stub alone
        assert r.cold_archives == 1 and r.objects == 0 and len(_objects(url)) == len(before) - 1
