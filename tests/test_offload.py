"""Offload of big values to an object store (issue 33, docs/offload.md): a real LangGraph graph
with a big ``files`` channel on SQLite and Postgres, a local directory and an S3-compatible
server process (moto_server on loopback); tampering, the object sweep, kill -9."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint

from offload_support import S3Server, files_graph, have_moto, s3_env, stored_bytes
from threadline.backends import open_saver
from threadline.codec import BlobCodec, Keyring
from threadline.errors import BackendError, ConfigError, CorruptRowError
from threadline.lifecycle import objects as O
from threadline.lifecycle.fsck import fsck
from threadline.objectstore import Offload, open_store

SMALL = 4096  # min_bytes where the size does not matter


@pytest.fixture(scope="module")
def s3():
    if not have_moto():
        pytest.skip("moto_server is not installed")
    s3_env()
    server = S3Server()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "db.sqlite")
    return request.getfixturevalue("pg_url")


@pytest.fixture(params=["file", "s3"])
def store_url(request, tmp_path):
    if request.param == "file":
        return f"file://{tmp_path / 'objects'}"
    return request.getfixturevalue("s3").bucket_url()


def _values(saver, config):
    return [(t.checkpoint["id"], t.checkpoint["channel_values"], sorted((w[1], str(w[2])[:64]) for w in t.pending_writes or []))
            for t in saver.list(config)]


def _put_chain(saver, thread="t1", n=4, size=20000):
    """n checkpoints on ``thread``: a dict channel that grows (deltas on an offloaded base) and a
    pending write of ``size`` bytes on each."""
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    ck = empty_checkpoint()
    files: dict = {}
    for i in range(n):
        files = {**files, f"f{i}": os.urandom(size).hex()}
        ck = create_checkpoint(ck, None, i)
        ck["channel_values"] = {"files": files, "n": i}
        ck["channel_versions"] = {"files": str(i + 1), "n": str(i + 1)}
        config = saver.put(config, ck, {"step": i}, {"files": str(i + 1), "n": str(i + 1)})
        saver.put_writes(config, [("files", {"w": os.urandom(size).hex()})], f"task{i}")
    return config


def test_graph_workload_offloaded_reads_back_exactly(db_url, tmp_path):
    """2-3 MB files rewritten every 3 steps: the database holds under 5 % of the bytes it holds
    without offload, and every checkpoint reads back exactly (from a saver with nothing cached)."""
    plain_url = str(tmp_path / "plain.sqlite") if not db_url.startswith("postgres") else db_url
    cfg = {"configurable": {"thread_id": "agent"}}
    off = Offload(f"file://{tmp_path / 'objects'}", min_bytes=64 << 10)
    with open_saver(plain_url, offload=None, codec=BlobCodec()) as s:
        files_graph(s, steps=9, size=2 << 20).invoke({"files": {}, "step": 0}, {**cfg, "recursion_limit": 100})
        without = stored_bytes(s)
        expected = _values(s, cfg)
    if plain_url == db_url:  # the same Postgres schema: start again empty
        with open_saver(db_url, codec=BlobCodec()) as s:
            s.delete_thread("agent")
    with open_saver(db_url, codec=BlobCodec(offload=off)) as s:
        files_graph(s, steps=9, size=2 << 20).invoke({"files": {}, "step": 0}, {**cfg, "recursion_limit": 100})
        with_offload = stored_bytes(s)
    assert with_offload < 0.05 * without, (with_offload, without)
    with open_saver(db_url, codec=BlobCodec(offload=Offload(off.objects))) as s:  # nothing cached
        got = _values(s, cfg)
        assert [g[0] for g in got] == [e[0] for e in expected] or len(got) == len(expected)
        assert [(g[1], g[2]) for g in got] == [(e[1], e[2]) for e in expected]
        report = O.collect(s, delete=False)
    assert report.named and not report.missing and not report.orphans


def test_every_value_kind_on_each_store(db_url, store_url):
    """Snapshots, deltas on offloaded bases and pending writes, small values: read back by a
    saver with nothing cached; objects are shared (content-addressed) across threads."""
    off = Offload(store_url, min_bytes=SMALL)
    with open_saver(db_url, codec=BlobCodec(offload=off)) as s:
        _put_chain(s, "t1")
        last = {"configurable": {"thread_id": "t1"}}
        expected = _values(s, last)
        s.copy_thread("t1", "t2")
        before = O.collect(s, delete=False)
    with open_saver(db_url, codec=BlobCodec(offload=Offload(store_url, min_bytes=SMALL))) as s:
        assert _values(s, last) == expected
        assert [v[1:] for v in _values(s, {"configurable": {"thread_id": "t2"}})] == [v[1:] for v in expected]
        after = O.collect(s, delete=False)
    assert after.stored == before.stored  # the copy added rows, no objects
    assert any(len(rows) >= 2 for rows in after.named.values())


def _offloaded(tmp_path, keys=None):
    store = f"file://{tmp_path / 'objects'}"
    url = str(tmp_path / "db.sqlite")
    with open_saver(url, codec=BlobCodec(keys=keys, offload=Offload(store, min_bytes=SMALL))) as s:
        last = _put_chain(s, n=2)
    objects = sorted(p for p in (tmp_path / "objects").rglob("*") if p.is_file())
    return url, store, last, objects


@pytest.mark.parametrize("encrypted", [False, True])
@pytest.mark.parametrize("damage", ["missing", "damaged", "swapped", "truncated"])
def test_tampered_object_is_corrupt_row(tmp_path, damage, encrypted):
    keys = Keyring([os.urandom(32)]) if encrypted else None
    url, store, last, objects = _offloaded(tmp_path, keys)
    assert len(objects) >= 2
    target = objects[0]
    if damage == "missing":
        target.unlink()
    elif damage == "damaged":
        raw = bytearray(target.read_bytes())
        raw[len(raw) // 2] ^= 1
        target.write_bytes(bytes(raw))
    elif damage == "swapped":
        target.write_bytes(objects[1].read_bytes())
    else:
        target.write_bytes(target.read_bytes()[:-10])
    with open_saver(url, codec=BlobCodec(keys=keys, offload=Offload(store, min_bytes=SMALL))) as s:
        with pytest.raises(CorruptRowError):
            for t in s.list({"configurable": {"thread_id": "t1"}}):
                pass
        report = fsck(s, deep=True)
        assert not report.ok


def test_encrypted_objects_hide_content_and_dedup(tmp_path):
    keys = Keyring([os.urandom(32)])
    url, store, last, objects = _offloaded(tmp_path, keys)
    for p in objects:
        assert p.name.startswith("k") and p.read_bytes()[:2] == b"\xc1\x02"


def test_reading_offloaded_rows_without_a_store_is_one_clear_error(tmp_path):
    url, store, last, _ = _offloaded(tmp_path)
    with open_saver(url, codec=BlobCodec()) as s:
        with pytest.raises(ConfigError, match="offloaded"):
            s.get_tuple(last)


def test_warn_threshold_logs_thread_and_channel(tmp_path, caplog):
    with open_saver(str(tmp_path / "db.sqlite"), codec=BlobCodec(offload=Offload(None, warn_bytes=1000))) as s:
        with caplog.at_level(logging.WARNING, "threadline.offload"):
            _put_chain(s, "warned", n=1, size=2000)
        assert stored_bytes(s) > 2000  # nothing offloaded without a store
    text = caplog.text
    assert "'warned'" in text and "'files'" in text


def test_bad_settings_are_one_clear_error(tmp_path, s3):
    with pytest.raises(ConfigError, match="unknown object store scheme"):
        Offload("gopher://x/y")
    with pytest.raises(ConfigError, match="absolute path"):
        Offload("file://relative/dir")
    with pytest.raises(ConfigError, match="min_bytes"):
        Offload.from_url("file:///tmp/x?min_bytes=lots")
    o = Offload.from_url(f"{s3.bucket_url()}&min_bytes=1000&warn_bytes=5000&grace_seconds=10")
    assert (o.min_bytes, o.warn_bytes, o.grace_seconds) == (1000, 5000, 10.0) and o.objects.url.startswith("s3://")
    dead = open_store("s3://nobucket/p?endpoint=http://127.0.0.1:9")
    with pytest.raises(BackendError, match="object store"):
        dead.put("v1/x", b"x")
    with open_saver(str(tmp_path / "db.sqlite"), codec=BlobCodec(offload=Offload("s3://nobucket/p?endpoint=http://127.0.0.1:9", min_bytes=10))) as s:
        with pytest.raises(BackendError, match="object store"):
            _put_chain(s, n=1, size=100)
        assert s.get_tuple({"configurable": {"thread_id": "t1"}}) is None  # nothing written


def test_redis_does_not_offload(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="not supported on redis"):
        with open_saver("redis://127.0.0.1:6379/0", offload=f"file://{tmp_path}/o"):
            pass
    from threadline import RedisSaver

    monkeypatch.setenv("THREADLINE_OFFLOAD", f"file://{tmp_path}/o")  # the environment's setting is for SQL savers
    assert RedisSaver(redis_url="redis://127.0.0.1:6379/0").blob_codec.offload is None
    with open_saver("redis://127.0.0.1:6379/0") as s:
        assert s.blob_codec.offload is None


def test_env_form(tmp_path, monkeypatch):
    monkeypatch.setenv("THREADLINE_OFFLOAD", f"file://{tmp_path / 'objects'}?min_bytes={SMALL}")
    with open_saver(str(tmp_path / "db.sqlite")) as s:
        assert s.blob_codec.offload.min_bytes == SMALL
        _put_chain(s, n=1)
    assert any(p.is_file() for p in (tmp_path / "objects").rglob("*"))


def test_delete_prune_and_sweep_collect_orphans(db_url, tmp_path):
    off = Offload(f"file://{tmp_path / 'objects'}", min_bytes=SMALL, grace_seconds=3600)
    with open_saver(db_url, codec=BlobCodec(offload=off)) as s:
        _put_chain(s, "a", n=3)
        _put_chain(s, "b", n=3)
        s.delete_thread("a")
        young = O.collect(s)  # within the grace period: kept
        assert young.orphans and young.deleted == 0
        s.prune(["b"], strategy="keep_latest")
        swept = O.collect(s, grace=0)
        assert swept.deleted == len(swept.orphans) > 0
        after = O.collect(s, delete=False)
        assert not after.orphans and not after.missing
        assert s.get_tuple({"configurable": {"thread_id": "b"}}) is not None


def test_sweeper_collects_objects(tmp_path):
    off = Offload(f"file://{tmp_path / 'objects'}", min_bytes=SMALL, grace_seconds=0)
    with open_saver(str(tmp_path / "db.sqlite"), codec=BlobCodec(offload=off), ttl={"default_ttl": 1 / 60_000}) as s:
        _put_chain(s, "old", n=2)
        time.sleep(0.01)
        report = s.sweep()
        assert report.threads_expired == 1 and report.objects_deleted > 0
        assert not any(p.is_file() for p in (tmp_path / "objects").rglob("*"))


def test_fsck_finds_and_repairs_orphans_and_missing(tmp_path):
    url, store, last, objects = _offloaded(tmp_path)
    (tmp_path / "objects" / "v1" / ("0" * 64)).write_bytes(b"stray")
    os.utime(tmp_path / "objects" / "v1" / ("0" * 64), (0, 0))
    objects[0].unlink()
    with open_saver(url, codec=BlobCodec(offload=Offload(store, min_bytes=SMALL))) as s:
        kinds = sorted(f.kind for f in fsck(s).findings)
        assert "orphan_object" in kinds and "missing_object" in kinds
        fixed = fsck(s, repair=True)
        assert [f for f in fixed.findings if f.kind == "orphan_object" and f.repaired]
        assert "orphan_object" not in {f.kind for f in fsck(s).findings}


# A process that loops until killed: puts, then ``{step}``, then the object sweep.
KILLED = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, {tests!r})
    from test_offload import _put_chain
    from threadline.backends import open_saver
    from threadline.codec import BlobCodec
    from threadline.lifecycle import objects as O
    from threadline.objectstore import Offload
    from threadline.lifecycle.cold import tier
    with open_saver({url!r}, codec=BlobCodec(offload=Offload({store!r}, min_bytes=4096, grace_seconds=0))) as s:
        i = 0
        while True:
            _put_chain(s, f"k{{i % 3}}", n=3, size=30000)
            {step}
            O.collect(s)
            print(i, flush=True)
            i += 1
""")
STEPS = {
    "puts": 's.prune([f"k{{(i + 1) % 3}}"], strategy="keep_latest")',
    # every thread tiered out, then read back (restored)
    "tiering": 'tier(s, 0); [s.get_tuple({{"configurable": {{"thread_id": f"k{{t}}"}}}}) for t in range(3)]',
}


@pytest.mark.parametrize("script,when", [("puts", 0.8), ("puts", 1.6), ("tiering", 0.7), ("tiering", 1.3)])
def test_kill_9_during_puts_prune_and_sweep(tmp_path, script, when):
    """kill -9 a process putting, pruning and sweeping (or tiering threads out and back): no row
    or stub names a missing object, every thread reads back, and the next sweep clears every orphan."""
    url, store = str(tmp_path / "db.sqlite"), f"file://{tmp_path / 'objects'}"
    code = KILLED.replace("{step}", STEPS[script]).format(tests=str(Path(__file__).parent), url=url, store=store)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    assert p.stdout.readline()  # one round done: the process is in its loop
    time.sleep(when)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert time.time() < deadline
    with open_saver(url, codec=BlobCodec(offload=Offload(store, min_bytes=4096, grace_seconds=0))) as s:
        report = O.collect(s)
        assert not report.missing and not report.unreadable
        assert not O.collect(s, delete=False).orphans
        for tid in ("k0", "k1", "k2"):
            for t in s.list({"configurable": {"thread_id": tid}}):
                assert t.checkpoint["channel_values"]["files"]
        report = O.collect(s)  # the archives of the threads just restored go
        assert not report.missing and report.deleted == len(report.orphans)
        assert not O.collect(s, delete=False).orphans


def test_backup_bundle_restore_carry_offloaded_values(db_url, tmp_path):
    """A backup and a bundle of an offloading database hold the values in their rows; restored
    into a database without offload, every checkpoint loads as it was."""
    from threadline.transfer.backup import backup, restore
    from threadline.transfer.bundle import bundle

    from threadline.lifecycle.cold import tier

    off = Offload(f"file://{tmp_path / 'objects'}", min_bytes=SMALL)
    with open_saver(db_url, codec=BlobCodec(offload=off)) as s:
        _put_chain(s, "cold", n=2)
        cold = _values(s, {"configurable": {"thread_id": "cold"}})
        assert tier(s, 0).threads == ["cold"]
        _put_chain(s, "t1", n=3)
        expected = _values(s, {"configurable": {"thread_id": "t1"}})
        backup(s, str(tmp_path / "backup.db"))
        bundle(s, ["t1"], str(tmp_path / "bundle.db"))
    for archive in ("backup.db", "bundle.db"):
        with open_saver(str(tmp_path / archive), codec=BlobCodec()) as a:
            assert not a.conn.execute("SELECT 1 FROM threadline_blobs WHERE type LIKE '%+obj+%' "
                                      "UNION SELECT 1 FROM threadline_writes WHERE type LIKE '%+obj+%'").fetchall()
        target = str(tmp_path / f"restored-{archive}")
        with open_saver(target, codec=BlobCodec()) as t:
            report = restore(t, str(tmp_path / archive))
            assert report.ok, report.to_json()
            assert _values(t, {"configurable": {"thread_id": "t1"}}) == expected
            if archive == "backup.db":  # a cold thread comes along, its rows from its archive
                assert _values(t, {"configurable": {"thread_id": "cold"}}) == cold


def test_cli_stats_and_fsck_repair(tmp_path):
    """The CLI takes the offload store from THREADLINE_OFFLOAD: `stats` shows in-row and
    offloaded bytes, `fsck --repair` clears an orphan past the grace period."""
    url, store, _, _ = _offloaded(tmp_path)
    stray = tmp_path / "objects" / "v1" / ("f" * 64)
    stray.write_bytes(b"stray")
    os.utime(stray, (0, 0))
    env = {**os.environ, "THREADLINE_OFFLOAD": f"{store}?min_bytes={SMALL}"}
    cli = [str(Path(sys.executable).parent / "threadline")]
    out = subprocess.run([*cli, "stats", "--json", "--db", url], env=env, capture_output=True, text=True, check=True).stdout
    import json

    off = json.loads(out)["offloaded"]
    assert off["rows"] > 0 and off["payload_bytes"] > off["in_row_bytes"] and off["objects"] > 0
    subprocess.run([*cli, "fsck", "--repair", "--db", url], env=env, capture_output=True, text=True)
    assert not stray.exists()


def test_cold_tier_moves_idle_threads_and_restores_them_on_first_touch(db_url, tmp_path):
    """Idle threads move whole to the store (rows replaced by a stub) and come back on the
    first get_tuple, list or graph run, exactly; offloaded values inside travel in the archive."""
    from threadline.lifecycle.cold import tier

    off = Offload(f"file://{tmp_path / 'objects'}", min_bytes=SMALL, grace_seconds=0)
    ids = [f"idle-{i}" for i in range(6)]
    with open_saver(db_url, codec=BlobCodec(offload=off)) as s:
        for tid in ids:
            _put_chain(s, tid, n=2, size=3000 if tid != "idle-0" else 20000)
        expected = {tid: _values(s, {"configurable": {"thread_id": tid}}) for tid in ids}
        before = stored_bytes(s)
        dry = tier(s, 0, dry_run=True)
        assert len(dry.threads) == 6 and dry.archive_bytes > 0 and stored_bytes(s) == before
        moved = tier(s, 0)
        assert sorted(moved.threads) == ids and stored_bytes(s) == 0
        swept = O.collect(s)  # idle-0's offloaded values travel inlined in its archive: their objects go
        assert swept.deleted > 0 and not [n for n in swept.removed if "/cold/" in n] and not swept.missing
    with open_saver(db_url, codec=BlobCodec(offload=Offload(off.objects, min_bytes=SMALL, grace_seconds=0))) as s:
        assert s.get_tuple({"configurable": {"thread_id": "idle-0"}}).checkpoint["channel_values"] == expected["idle-0"][0][1]
        assert _values(s, {"configurable": {"thread_id": "idle-1"}}) == expected["idle-1"]  # list restores too
        for tid in ids:
            assert _values(s, {"configurable": {"thread_id": tid}}) == expected[tid]
        assert not tier(s, 3600).threads  # just read: not idle
        report = O.collect(s)
        assert not report.missing and report.deleted == 6  # the archives, once restored


def test_cold_thread_resumes_in_a_graph_and_concurrent_first_reads_restore_once(db_url, tmp_path):
    import threading

    from threadline.lifecycle.cold import tier

    url = db_url
    off = Offload(f"file://{tmp_path / 'objects'}", min_bytes=SMALL)
    cfg = {"configurable": {"thread_id": "agent"}, "recursion_limit": 100}
    with open_saver(url, codec=BlobCodec(offload=off)) as s:
        files_graph(s, steps=4, size=30000).invoke({"files": {}, "step": 0}, cfg)
        assert tier(s, 0).threads == ["agent"]
    results, errors = [], []

    def first_read():
        try:
            with open_saver(url, codec=BlobCodec(offload=Offload(off.objects, min_bytes=SMALL))) as r:
                results.append(r.get_tuple(cfg).checkpoint["channel_values"]["step"])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=first_read) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and results == [4, 4, 4, 4]
    with open_saver(url, codec=BlobCodec(offload=Offload(off.objects, min_bytes=SMALL))) as s:
        assert tier(s, 0).threads == ["agent"]  # cold again
        files = s.get_tuple(cfg).checkpoint["channel_values"]["files"]
        assert tier(s, 0).threads == ["agent"]  # cold again
        graph = files_graph(s, steps=8, size=30000)
        out = graph.invoke({"step": 4}, cfg)  # a new turn on the cold thread, the graph not knowing
        assert out["step"] == 8 and set(files) <= set(out["files"])
        assert len(list(s.list(cfg))) > 5


def test_missing_archive_is_corrupt_and_keeps_the_stub(tmp_path):
    from threadline.lifecycle.cold import tier

    url, store, last, _ = _offloaded(tmp_path)
    with open_saver(url, codec=BlobCodec(offload=Offload(store, min_bytes=SMALL))) as s:
        tier(s, 0)
    for p in (tmp_path / "objects" / "v1" / "cold").glob("*"):
        p.unlink()
    with open_saver(url, codec=BlobCodec(offload=Offload(store, min_bytes=SMALL))) as s:
        with pytest.raises(CorruptRowError, match="archive is missing"):
            s.get_tuple(last)
        with pytest.raises(CorruptRowError):
            s.get_tuple(last)  # still cold: nothing was lost


def test_cli_tier(tmp_path):
    url, store, _, _ = _offloaded(tmp_path)
    env = {**os.environ, "THREADLINE_OFFLOAD": f"{store}?min_bytes={SMALL}"}
    cli = [str(Path(sys.executable).parent / "threadline")]
    run = lambda *a: subprocess.run([*cli, *a, "--db", url, "--json"], env=env, capture_output=True, text=True, check=True).stdout  # noqa: E731
    import json

    assert json.loads(run("tier", "--idle", "0s", "--dry-run"))["threads"] == 1
    assert json.loads(run("tier", "--idle", "0s"))["threads"] == 1
    assert json.loads(run("tier", "--idle", "0s"))["threads"] == 0
    assert json.loads(run("tier", "--restore", "t1"))["restored"] == ["t1"]
    assert json.loads(run("tier", "--idle", "1h"))["threads"] == 0  # restored: read just now


def test_sweeper_tiers_idle_threads(tmp_path):
    off = Offload(f"file://{tmp_path / 'objects'}", min_bytes=SMALL, cold_after=0)
    with open_saver(str(tmp_path / "db.sqlite"), codec=BlobCodec(offload=off)) as s:
        _put_chain(s, "sleepy", n=2, size=3000)
        expected = _values(s, {"configurable": {"thread_id": "sleepy"}})
        report = s.sweep()
        assert report.threads_tiered == 1 and stored_bytes(s) == 0
        assert _values(s, {"configurable": {"thread_id": "sleepy"}}) == expected


def test_encrypted_cold_archive(tmp_path):
    from threadline.lifecycle.cold import tier

    keys = Keyring([os.urandom(32)])
    url, store, last, _ = _offloaded(tmp_path, keys)
    with open_saver(url, codec=BlobCodec(keys=keys, offload=Offload(store, min_bytes=SMALL))) as s:
        expected = _values(s, {"configurable": {"thread_id": "t1"}})
        assert tier(s, 0).threads == ["t1"]
    archive = next((tmp_path / "objects" / "v1" / "cold").glob("*"))
    assert archive.read_bytes()[:2] == b"\xc1\x02" and b"thread_id" not in archive.read_bytes()
    with open_saver(url, codec=BlobCodec(offload=Offload(store, min_bytes=SMALL))) as s:  # no keys
        with pytest.raises(CorruptRowError):
            s.get_tuple(last)
    with open_saver(url, codec=BlobCodec(keys=keys, offload=Offload(store, min_bytes=SMALL))) as s:
        assert _values(s, {"configurable": {"thread_id": "t1"}}) == expected


def test_deleting_a_cold_thread_deletes_it(tmp_path):
    from threadline.lifecycle.cold import tier

    url, store, last, _ = _offloaded(tmp_path)
    with open_saver(url, codec=BlobCodec(offload=Offload(store, min_bytes=SMALL, grace_seconds=0))) as s:
        assert tier(s, 0).threads == ["t1"]
        s.delete_thread("t1")
        assert s.get_tuple(last) is None and not list(s.list({"configurable": {"thread_id": "t1"}}))
        O.collect(s)
    assert not [p for p in (tmp_path / "objects").rglob("*") if p.is_file()]
