"""The lifecycle and transfer tools (``threadline.lifecycle``, ``threadline.transfer``) and their CLI
commands on Redis — plain Redis 7 and the local cluster — do what they do on SQLite for the same
graph history (``test_read_redis.Tee``: one run of real LangGraph graphs written to both).

Backup and restore copy between Redis, SQLite and Postgres, values included, each restored
thread verified (loaded on both sides) before it is kept. And no module of ``lifecycle/`` or
``transfer/`` holds SQL or branches on a backend.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from backends import make_backend
from cli_support import cli, one_line_error
from lifecycle_graphs import cfg, populate
from test_read_redis import THREADS, Tee, pair, raw, timeless  # noqa: F401 (pair: the fixture)
from threadline import lifecycle, read
from threadline.cli import app
from threadline.transfer.backup import backup, restore
from threadline.transfer.bundle import REDACTED, bundle
from threadline.storage.ops import sweep as sweep_ops


def _cli(*args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert result.exit_code == code, (args, result.output, result.exception)
    return result


def _json(*args: str, code: int = 0) -> Any:
    return json.loads(_cli(*args, "--json", code=code).stdout)


def one_error(proc: Any, code: int, *fragments: str) -> str:
    """``one_line_error`` once the setup warning of a Redis without persistence (the test server's) is set aside."""
    proc.stderr = "\n".join(line for line in proc.stderr.splitlines() if "persistence is off" not in line)
    return one_line_error(proc, code, *fragments)


def loaded(saver: Any) -> dict[str, Any]:
    """Every thread's every checkpoint, loaded: values, metadata, parent, pending writes."""
    out = {}
    for tid in saver.run(read.all_thread_ids_op(saver.dialect)):
        out[tid] = {
            (t.config["configurable"]["checkpoint_ns"], t.config["configurable"]["checkpoint_id"]): read.jsonable(
                (t.checkpoint["channel_values"], t.checkpoint["channel_versions"], t.metadata,
                 t.parent_config and t.parent_config["configurable"]["checkpoint_id"], t.pending_writes))
            for ns in {n for n in read.thread_history(saver, tid, include_subgraphs=True).nodes}
            for t in saver.list({"configurable": {"thread_id": tid, "checkpoint_ns": ns}})
        }
    return out


def _without_bytes(report: Any) -> Any:
    """A report without its stored-bytes figures (``bytes``, ``bytes_freed``, …)."""
    if isinstance(report, dict):
        return {k: _without_bytes(v) for k, v in report.items() if "bytes" not in k}
    if isinstance(report, list):
        return [_without_bytes(v) for v in report]
    return report


def _bytes(report: Any) -> int:
    """The sum of a report's stored-bytes figures."""
    if isinstance(report, dict):
        return sum(v if "bytes" in k and isinstance(v, int) else _bytes(v) for k, v in report.items())
    if isinstance(report, list):
        return sum(map(_bytes, report))
    return 0


def test_rollback_fork_delete_prune_as_on_sqlite(pair):
    """Deterministic changes (rebuild, delete, prune) print and leave what they do on SQLite; rollback and fork
    (new checkpoint ids) leave the same state."""
    a, b = pair.sqlite.url, pair.redis.url
    for args in (("rebuild", "t-research", "HEAD", "--graph", "lifecycle_graphs:graph"), ("delete", "agent-1", "HEAD~1", "--reparent", "--yes"), ("delete", "t-research", "HEAD~1", "--with-descendants", "--dry-run"),
                 ("prune", "--keep-last", "3", "--dry-run"), ("prune", "--keep-last", "3", "--yes")):
        on_a, on_b = _json(*args, "--db", a), _json(*args, "--db", b)
        on_a.pop("space", None), on_b.pop("space", None)  # bytes on disk: a file's, none on Redis
        # stored bytes: SQLite keeps a document's versions compacted (``jsontext.compact_doc``), Redis as written
        assert _bytes(on_a) <= _bytes(on_b) and bool(_bytes(on_a)) == bool(_bytes(on_b)), args
        assert timeless(_without_bytes(on_b)) == timeless(_without_bytes(on_a)), args
    for args in (("rollback", "t-research", "HEAD~1"), ("fork", "t-answer", "HEAD", "--to", "t-copy")):
        _json(*args, "--db", a), _json(*args, "--db", b)
    for tid in (*THREADS, "t-copy"):
        sa, sb = read.state_at(pair.a, tid), read.state_at(pair.b, tid)
        assert read.jsonable(sb.values) == read.jsonable(sa.values) and sb.next == sa.next, tid
        assert len(read.thread_history(pair.b, tid).ordered()) == len(read.thread_history(pair.a, tid).ordered())
    assert _json("fsck", "--db", b)["ok"]
    one_error(cli("delete", "agent-1", "HEAD~1", "--yes", "--db", b), 1, "child")


def test_fsck_finds_and_repairs_on_redis(pair):
    b, url = pair.b, pair.redis.url
    same = _json("fsck", "--deep", "--db", url)
    assert same == _json("fsck", "--deep", "--db", pair.sqlite.url) and same["ok"] and same["threads_checked"] == len(THREADS)
    head = read.state_at(b, "t-answer").checkpoint_id
    parent = read.state_at(b, "t-answer").parent_checkpoint_id
    with raw(pair.redis) as target:  # a checkpoint lost under its child: a broken parent link
        client = target.client()
        client.hdel(b.dialect.keys("t-answer").ck, f"\x00{parent}")
        client.zrem(b.dialect.keys("t-answer").ids, f"\x00{parent}")
    found = _json("fsck", "--db", url, code=1)
    assert not found["ok"] and any(f["thread_id"] == "t-answer" and f["checkpoint_id"] == head for f in found["findings"])
    repaired = _json("fsck", "--repair", "--db", url)
    assert repaired["ok"] and any(f["repaired"] for f in repaired["findings"])
    assert _json("fsck", "--db", url)["ok"]
    assert read.state_at(b, "t-answer").parent_checkpoint_id is None


@pytest.mark.parametrize("other", ["sqlite", "postgres"])
def test_backup_restore_between_redis_and_sql(pair, other: str, tmp_path: Path, request: pytest.FixtureRequest):
    """Redis → archive → SQLite or Postgres, and SQLite or Postgres → archive → a fresh Redis prefix:
    every thread restored verified, every checkpoint loading as at the source."""
    want = loaded(pair.a)
    assert loaded(pair.b) == want
    archived = _json("backup", "--to", str(tmp_path / "redis.db"), "--db", pair.redis.url)
    assert archived["method"] == "rows" and archived["threads"] == len(THREADS)
    (tmp_path / "t").mkdir()
    target = make_backend(other, tmp_path / "t", request)
    restored = _json("restore", str(tmp_path / "redis.db"), "--db", target.url)
    assert restored["ok"] and restored["verified"] and len(restored["threads"]) == len(THREADS)
    with target.open(is_async=False) as saver:
        assert loaded(saver) == want
        saver_backup = backup(saver, str(tmp_path / "sql.db"))
    assert saver_backup.rows["checkpoints"] == archived["rows"]["checkpoints"]
    fresh = make_backend(pair.redis.kind, tmp_path, request)
    back = _json("restore", str(tmp_path / "sql.db"), "--db", fresh.url)
    assert back["ok"] and back["verified"] and back["rows"] == restored["rows"]
    with fresh.open(is_async=False) as saver:
        assert loaded(saver) == want
        assert _json("stats", "--db", fresh.url)["tables"] == _json("stats", "--db", pair.redis.url)["tables"]
        assert restore(saver, str(tmp_path / "sql.db"), replace=True).ok  # again, over itself
    one_error(cli("restore", str(tmp_path / "sql.db"), "--db", fresh.url), 2, "already exist", "--replace")


def test_restored_redis_threads_keep_their_ttl(pair, tmp_path: Path, request: pytest.FixtureRequest):
    """A thread restored into Redis keeps the TTL it was written under, on all its keys at once,
    whatever the restoring saver's: none for a thread written without one (issue 42 §6)."""
    from langgraph.graph import END, START, StateGraph

    with pair.sqlite.open(ttl={"default_ttl": 5}) as timed:
        g = StateGraph(dict)
        g.add_node("n", lambda s: {"x": 1})
        g.add_edge(START, "n")
        g.add_edge("n", END)
        g.compile(checkpointer=timed).invoke({"x": 0}, {"configurable": {"thread_id": "timed"}})
    backup(pair.a, str(tmp_path / "a.db"))
    fresh = make_backend(pair.redis.kind, tmp_path, request)
    with fresh.open(is_async=False, ttl={"default_ttl": 60}) as saver:
        assert restore(saver, str(tmp_path / "a.db")).ok
        with raw(fresh) as target:
            client = target.client()
            for tid in (*THREADS, "timed"):
                ttls = [client.pttl(k) for k in saver.dialect.keys(tid) if client.exists(k)]
                assert len(ttls) >= 4, (tid, ttls)
                assert all(0 < t <= 300_000 for t in ttls) if tid == "timed" else all(t == -1 for t in ttls), (tid, ttls)


def test_bundles_between_redis_and_sqlite(pair, tmp_path: Path, request: pytest.FixtureRequest):
    out = _json("bundle-export", "t-research", "agent-1", "--redact", "messages", "--to", str(tmp_path / "r.bundle"), "--db", pair.redis.url)
    assert out["threads"] == ["t-research", "agent-1"] and out["redacted"] == ["__start__", "messages"]
    plain = tmp_path / "s.bundle"
    bundle(pair.a, ["t-interrupt"], str(plain))
    (tmp_path / "s").mkdir()
    fresh_sqlite = make_backend("sqlite", tmp_path / "s", request)
    fresh_redis = make_backend(pair.redis.kind, tmp_path, request)
    assert _json("bundle-import", str(tmp_path / "r.bundle"), "--db", fresh_sqlite.url)["ok"]
    imported = _json("bundle-import", str(plain), "--db", fresh_redis.url)
    assert imported["ok"] and imported["verified"]
    with fresh_redis.open(is_async=False) as saver:
        assert loaded(saver) == {"t-interrupt": loaded(pair.a)["t-interrupt"]}
        assert read.state_at(saver, "t-interrupt").next == ["approve"]
    with fresh_sqlite.open(is_async=False) as saver:
        assert read.state_at(saver, "agent-1").values["messages"] == REDACTED


def _parquet(directory: Path) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for table in ("checkpoints", "writes", "blobs"):
        rows = pq.read_table(directory / table).to_pylist() if (directory / table).exists() else []
        # stored sizes aside: SQLite keeps a document's versions compacted (``jsontext.compact_doc``), Redis as written
        out[table] = sorted((json.dumps({k: v for k, v in r.items() if k not in ("created_at", "dt", "checkpoint_bytes")}, sort_keys=True, default=str)
                             for r in rows))
    return out


def test_parquet_export_as_on_sqlite(pair, tmp_path: Path):
    for values in ((), ("--values",)):
        ra = _json("export", "--to", str(tmp_path / f"a{len(values)}"), *values, "--db", pair.sqlite.url)
        rb = _json("export", "--to", str(tmp_path / f"b{len(values)}"), *values, "--db", pair.redis.url)
        assert rb["rows"] == ra["rows"] and rb["threads"] == ra["threads"] == len(THREADS)
        assert _parquet(tmp_path / f"b{len(values)}") == _parquet(tmp_path / f"a{len(values)}")


def test_sweep_on_redis(pair):
    """Retention works as on SQLite; TTL is Redis's own expiry (nothing to expire); the lease is a
    key (SET NX PX): one holder at a time, renewed and released by its owner only."""
    policy = lifecycle.RetentionPolicy(keep_last=2)
    pair.a.retention = pair.b.retention = policy
    ra, rb = pair.a.sweep(), pair.b.sweep()
    assert rb.ran and rb.threads_expired == 0 and rb.space.bytes_before is None
    assert (rb.threads_pruned, rb.checkpoints_deleted) == (ra.threads_pruned, ra.checkpoints_deleted) and rb.checkpoints_deleted > 0
    for tid in THREADS:
        assert read.jsonable(read.state_at(pair.b, tid).values) == read.jsonable(read.state_at(pair.a, tid).values)
    assert _json("sweep", "--keep-last", "2", "--db", pair.redis.url)["checkpoints_deleted"] == 0
    d, run = pair.b.dialect, pair.b.run
    assert run(sweep_ops.claim(d, "job", "one", 1000.0, 60, 0), write=True)
    assert not run(sweep_ops.claim(d, "job", "two", 1001.0, 60, 0), write=True)
    assert not run(sweep_ops.renew(d, "job", "two", 2000.0), write=True)
    assert run(sweep_ops.renew(d, "job", "one", 2000.0), write=True)
    run(sweep_ops.finish(d, "job", "two", 1002.0, {"x": 1}), write=True)  # not its lease: nothing changes
    assert run(sweep_ops.last_run(d, "job"))["finished_at"] is None
    run(sweep_ops.finish(d, "job", "one", 1003.0, {"x": 1}), write=True)
    assert run(sweep_ops.last_run(d, "job")) == {"owner": "one", "lease_until": 0.0, "started_at": 1000.0, "finished_at": 1003.0, "result": {"x": 1}}
    assert not run(sweep_ops.claim(d, "job", "two", 1004.0, 60, 10), write=True)  # min_gap since the last run
    assert run(sweep_ops.claim(d, "job", "two", 1020.0, 60, 10), write=True)


@pytest.mark.parametrize("command", [("vacuum",), ("vacuum", "--full"), ("partition",)])
def test_what_does_not_apply_to_redis_says_so(command: tuple[str, ...], tmp_path: Path, request: pytest.FixtureRequest):
    """Exit status 2 (bad usage), one line, nothing changed."""
    backend = make_backend("redis", tmp_path, request)
    with backend.open() as saver:
        populate(saver)
        before = loaded(saver)
    one_error(cli(*command, "--db", backend.url), 2, f"{command[0]} does not apply to redis")
    with backend.open() as saver:
        assert loaded(saver) == before


def test_lifecycle_and_transfer_hold_no_sql_and_no_backend_branch():
    import threadline.evolve as E
    import threadline.lifecycle as L
    import threadline.transfer as T

    for package in (Path(L.__file__).parent, Path(T.__file__).parent, Path(E.__file__).parent):
        for path in sorted(package.glob("*.py")):
            tree = ast.parse(path.read_text())
            docs = {id(n.body[0].value) for n in ast.walk(tree)
                    if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) and n.body
                    and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
            strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]
            for s in strings:
                assert not re.search(r"\b(SELECT|INSERT|UPDATE|DELETE FROM|CREATE|DROP|ALTER|VACUUM|PRAGMA)\b|\bthreadline_\w+\b.*\bWHERE\b", s), (path.name, s)
            source = path.read_text()
            assert not re.search(r"\.name\s*[=!]=|\b(SQLITE|POSTGRES|RedisDialect|SqliteDialect|PostgresDialect)\b", source), path.name
            assert "import sqlite3" not in source and "psycopg" not in source, path.name


def test_import_of_an_official_database_into_redis(any_redis_target, tmp_path: Path):
    """``threadline import`` of an official SqliteSaver file into Redis: verified, each thread as the official saver returns it."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver as OfficialSqliteSaver

    conn = sqlite3.connect(tmp_path / "official.db", check_same_thread=False)
    official = OfficialSqliteSaver(conn)
    official.setup()
    populate(official)
    url = f"{any_redis_target.url}{'&' if '?' in any_redis_target.url else '?'}prefix={any_redis_target.prefix}"
    report = _json("import", str(tmp_path / "official.db"), "--db", url)
    assert report["ok"] and all(t["verified"] for t in report["threads"]) and len(report["threads"]) == 3
    from threadline import open_saver

    with open_saver(url) as saver:
        for tid in ("t-research", "t-answer", "t-interrupt"):
            want = [read.jsonable((t.checkpoint["channel_values"], t.metadata, t.pending_writes)) for t in official.list(cfg(tid))]
            got = [read.jsonable((t.checkpoint["channel_values"], t.metadata, t.pending_writes)) for t in saver.list(cfg(tid))]
            assert got == want, tid
        assert read.list_threads(saver).total == 3
    conn.close()


def test_a_thread_failing_verification_leaves_nothing_on_redis(pair, tmp_path: Path, request: pytest.FixtureRequest):
    """Redis has no transaction to roll back: a restored thread that does not verify is deleted
    again, so the target is left as a rolled-back SQL transaction leaves it."""
    from threadline.lifecycle import thread_rows as B

    fresh = make_backend(pair.redis.kind, tmp_path, request)
    (tmp_path / "s").mkdir()
    sqlite = make_backend("sqlite", tmp_path / "s", request)
    with fresh.open(is_async=False) as r, sqlite.open(is_async=False) as s:
        for target in (r, s):
            d = target.dialect
            columns = target.run(B.columns_op(d))
            rows = pair.b.run(B.thread_rows_op(pair.b.dialect, "t-answer", pair.b.run(B.columns_op(pair.b.dialect))))
            expected = B.Expected(target.serde, target.blob_codec, {})  # no checkpoint expected: every one stored differs
            with pytest.raises(B.Differs, match="checkpoints differ"):
                target.run(B.store_thread_op(d, "t-answer", rows, columns, replace=False, expected=expected), write=True)
            assert target.run(read.all_thread_ids_op(d)) == [] and not target.run(B.thread_rows_op(d, "t-answer", {"checkpoints": ["checkpoint_id"]}))["checkpoints"][1]
        with raw(fresh) as server:
            assert not [k for k in server.keys() if b"{t-answer}" in k]
