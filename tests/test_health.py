"""``threadline health`` and ``lifecycle.health.check``: a timed round trip on a reserved thread
(deleted after, never listed), schema, sweeper, errors and growth; exit codes 0 / 1 / 2. Real
graphs on SQLite, Postgres and Redis; the command through typer's CliRunner."""

from __future__ import annotations

import json
import sqlite3
import threading
import time

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from typer.testing import CliRunner

from lifecycle_graphs import populate
from threadline import SqliteSaver, metrics, open_saver
from threadline.cli import app
from threadline.errors import SerializationError
from threadline.keys import RESERVED_THREAD_PREFIX
from threadline.lifecycle import health as H
from threadline.lifecycle.jobs import run_job
from threadline.read import list_threads
from threadline.storage.ops import sweep as sweep_ops
from threadline.web.queries import search_threads_op

from backends import Backend

runner = CliRunner()


def _cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["health", *args], env={"COLUMNS": "200"})
    return result.exit_code, result.output


def test_healthy_after_a_real_graph(sync_backend: Backend) -> None:
    with sync_backend.open() as saver:
        facts = populate(saver)
        before = sync_backend.snapshot()
        h = H.check(saver)
        assert h.status == "healthy" and h.exit_code == 0, h.problems
        assert 0 < h.round_trip["put_ms"] <= h.round_trip["total_ms"] and h.round_trip["get_ms"] > 0
        assert h.schema["pending"] == [] and h.schema["version"] == h.schema["latest"]
        assert h.growth["checkpoints"] == sync_backend.counts()["checkpoints"] > 0 and h.growth["checkpoint_bytes"] > 0
        assert h.growth["writes"] > 0 and h.sweeper is None
        assert sync_backend.snapshot() == before  # the probe's thread is gone, nothing else changed
        assert facts


def test_reserved_threads_are_never_listed(sync_backend: Backend) -> None:
    with sync_backend.open() as saver:
        cfg = {"configurable": {"thread_id": "user-1", "checkpoint_ns": ""}}
        saver.put(cfg, empty_checkpoint(), {"step": 0}, {})
        hidden = {"configurable": {"thread_id": RESERVED_THREAD_PREFIX + "health:1:x", "checkpoint_ns": ""}}
        saver.put(hidden, empty_checkpoint(), {"step": 0}, {})
        page = list_threads(saver)
        assert [t.thread_id for t in page.threads] == ["user-1"] and page.total == 1
        found = saver.run(search_threads_op(saver.dialect, pattern="*"))
        assert [t.thread_id for t in found.threads] == ["user-1"]


def test_the_probe_thread_is_hidden_while_it_exists(tmp_path) -> None:
    """Stopped between its put and its get, the probe's thread is stored and still not listed."""
    with SqliteSaver.from_conn_string(str(tmp_path / "h.db")) as saver:
        h = H.Health("sqlite", time.time())
        job = H._round_trip(saver, h, time.time, 1000.0)
        op, write = next(job)
        stored = saver.run(op, write=write)
        assert stored["configurable"]["thread_id"].startswith(RESERVED_THREAD_PREFIX)
        assert list_threads(saver).total == 0
        op, write = job.send(stored)
        op, write = job.send(saver.run(op, write=write))  # the get; then the delete
        saver.run(op, write=write)
        assert len(list(saver.list(None))) == 0


def test_sweeper_lag_errors_and_a_dead_sweep(tmp_path) -> None:
    with SqliteSaver.from_conn_string(str(tmp_path / "s.db"), ttl={"default_ttl": 60}) as saver:
        assert H.check(saver, max_sweep_lag=60).status == "degraded"  # never swept
        saver.sweep()
        h = H.check(saver, max_sweep_lag=60)
        assert h.status == "healthy" and h.sweeper["lag_seconds"] < 60 and h.sweeper["errors"] == []
        later = run_job(saver, H.health_job(saver, max_sweep_lag=60, clock=lambda: time.time() + 3600))
        assert later.status == "degraded" and any("no sweep finished in the last 60 s" in p for _, p in later.problems)
        # a sweeper that claimed the lease and died: its lease ran out unfinished
        assert saver.run(sweep_ops.claim(saver.dialect, "sweeper", "dead-host:1", time.time(), 0.001, 0.0), write=True)
        time.sleep(0.01)
        h = H.check(saver)
        assert h.exit_code == 1 and any("ended without finishing" in p for _, p in h.problems)


def test_errors_of_this_process_are_counted(tmp_path) -> None:
    with SqliteSaver.from_conn_string(str(tmp_path / "e.db")) as saver:
        before = metrics.error_counts().get("put:SerializationError", 0)
        ck = empty_checkpoint()
        ck["channel_values"], ck["channel_versions"] = {"x": threading.Lock()}, {"x": "1"}
        with pytest.raises(SerializationError):
            saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, ck, {}, {"x": "1"})
        assert H.check(saver).errors["put:SerializationError"] == before + 1


def test_redis(redis_target) -> None:
    url = f"{redis_target.url}{'&' if '?' in redis_target.url else '?'}prefix={redis_target.prefix}"
    with open_saver(url) as saver:
        populate(saver)
        keys = set(redis_target.keys())
        h = H.check(saver)
        assert h.status == "healthy", h.problems
        assert h.backend == "redis" and h.round_trip["total_ms"] > 0 and h.growth["checkpoints"] > 0
        assert set(redis_target.keys()) == keys  # the probe left nothing behind
        assert all(not t.thread_id.startswith(RESERVED_THREAD_PREFIX) for t in list_threads(saver).threads)


def test_cli_exit_codes_and_json(tmp_path) -> None:
    path = str(tmp_path / "c.db")
    with SqliteSaver.from_conn_string(path) as saver:
        populate(saver)
    code, out = _cli("--db", path)
    assert code == 0 and out.startswith("healthy (sqlite)") and "round trip: put" in out
    code, out = _cli("--db", path, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["status"] == "healthy" and doc["schema"]["pending"] == [] and doc["growth"]["checkpoints"] > 0
    code, out = _cli("--db", path, "--max-sweep-lag", "15m", "--json")
    assert code == 1 and json.loads(out)["status"] == "degraded"
    code, out = _cli("--db", path, "--max-round-trip-ms", "0")
    assert code == 1 and "round trip took" in out


def test_cli_pending_migrations_are_reported_not_applied(tmp_path) -> None:
    path = str(tmp_path / "old.db")
    with SqliteSaver.from_conn_string(path):
        pass
    with sqlite3.connect(path) as conn:
        newest = conn.execute("SELECT MAX(v) FROM threadline_migrations").fetchone()[0]
        conn.execute("DELETE FROM threadline_migrations WHERE v = ?", (newest,))
    code, out = _cli("--db", path, "--json")
    doc = json.loads(out)
    assert code == 1 and doc["schema"]["pending"] == [newest] and doc["round_trip"] is None
    with sqlite3.connect(path) as conn:  # a probe never migrates
        assert conn.execute("SELECT COUNT(*) FROM threadline_migrations WHERE v = ?", (newest,)).fetchone()[0] == 0


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--db", "{tmp}/missing.db"], "does not exist"),
        (["--db", "foo://x"], "unknown database URL scheme"),
        (["--db", "postgresql://postgres@127.0.0.1:1/x"], "cannot connect to Postgres"),
        (["--db", "{tmp}"], "directory"),
    ],
)
def test_cli_unreachable_is_exit_2(tmp_path, args: list[str], fragment: str) -> None:
    code, out = _cli(*(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert code == 2 and out.startswith("unhealthy") and fragment in " ".join(out.split()), out


def test_cli_bad_input_is_one_line_exit_2(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("THREADLINE_DB", raising=False)
    result = runner.invoke(app, ["health"])
    assert result.exit_code == 2 and "pass --db URL" in result.output
    result = runner.invoke(app, ["health", "--db", str(tmp_path / "x.db"), "--max-sweep-lag", "soon"])
    assert result.exit_code == 2 and "not a duration" in result.output


async def test_async_saver(tmp_path) -> None:
    from threadline import AsyncSqliteSaver

    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.db")) as saver:
        h = await H.acheck(saver)
        assert h.status == "healthy" and h.round_trip["total_ms"] > 0
        assert [t async for t in saver.alist(None)] == []
