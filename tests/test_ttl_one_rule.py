"""TTL, one rule on every backend (issue 42 §6), SQLite, Postgres and Redis, with a real graph: a
thread is subject to TTL once written under one (by a saver opened with ``ttl=``, or a run
naming its own ``ttl_minutes``); a thread another program wrote without a TTL never expires by
a TTL saver's sweep or reads, only when the sweep is told to take the whole database
(``all_threads`` / ``--all-threads``); ``dry_run`` lists exactly what the real sweep then deletes."""

from __future__ import annotations

import operator
import time
from typing import Annotated, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from typer.testing import CliRunner

from threadline.cli import app
from threadline.errors import ConfigError

TTL_MINUTES = 0.01  # 0.6 s: the threads written under it are past it after PAST seconds
PAST = 1.5


class State(TypedDict, total=False):
    turns: Annotated[int, operator.add]


def build(checkpointer):
    b = StateGraph(State)
    b.add_node("turn", lambda s: {"turns": 1})
    b.add_edge(START, "turn")
    b.add_edge("turn", END)
    return b.compile(checkpointer=checkpointer)


def cfg(tid: str) -> dict:
    return {"configurable": {"thread_id": tid}}


def _there(backend, tid: str) -> bool:
    with backend.open() as saver:
        return saver.get_tuple(cfg(tid)) is not None


@pytest.mark.parametrize("kind", ("sqlite", "postgres", "redis"))
def test_a_sweep_expires_only_threads_written_under_a_ttl(kind, fresh_backend):
    b = fresh_backend(kind)
    with b.open() as plain, b.open(ttl={"default_ttl": TTL_MINUTES, "refresh_on_read": True}) as ttled:
        build(plain).invoke({}, cfg("other"))  # another program, no TTL
        build(plain).invoke({}, cfg("other-read"))
        build(ttled).invoke({}, cfg("mine"))
        build(ttled).invoke({}, cfg("mine-then-plain"))
        build(plain).invoke({}, cfg("mine-then-plain"))  # a write without a TTL keeps the thread's
        assert build(ttled).get_state(cfg("other-read")).values == {"turns": 1}  # a read gives no TTL
        time.sleep(PAST)
        dry = ttled.sweep(dry_run=True)
        assert dry.ran and dry.dry_run
        # on Redis the keys of threads written under a TTL expire by themselves: the sweep finds them gone
        assert set(dry.expired) == (set() if kind == "redis" else {"mine", "mine-then-plain"})
        assert all(_there(b, t) for t in dry.expired)  # the dry run deleted nothing
        real = ttled.sweep()
        assert sorted(real.expired) == sorted(dry.expired) and real.threads_expired == dry.threads_expired
        assert real.checkpoints_deleted == dry.checkpoints_deleted
    for tid in ("mine", "mine-then-plain"):
        assert not _there(b, tid), tid
    for tid in ("other", "other-read"):
        assert _there(b, tid), tid


@pytest.mark.parametrize("kind", ("sqlite", "postgres", "redis"))
def test_the_whole_database_only_when_asked(kind, fresh_backend):
    b = fresh_backend(kind)
    with b.open() as plain:
        for tid in ("a", "b", "kept"):
            build(plain).invoke({}, cfg(tid))
        build(plain).invoke({}, {"configurable": {"thread_id": "kept", "ttl_minutes": "never"}})  # its own TTL wins
    time.sleep(PAST)
    with b.open(ttl={"default_ttl": TTL_MINUTES}) as ttled:
        assert ttled.sweep().expired == []
        dry = ttled.sweep(dry_run=True, all_threads=True)
        assert sorted(dry.expired) == ["a", "b"] and dry.all_threads and dry.checkpoints_deleted > 0
        assert _there(b, "a") and _there(b, "b")
        real = ttled.sweep(all_threads=True)
        assert sorted(real.expired) == ["a", "b"] and real.checkpoints_deleted == dry.checkpoints_deleted
    assert not _there(b, "a") and not _there(b, "b") and _there(b, "kept")
    with b.open() as plain, pytest.raises(ConfigError, match="whole database needs"):
        plain.sweep(all_threads=True)


@pytest.mark.parametrize("kind", ("sqlite", "redis"))
def test_cli_sweep_dry_run_and_all_threads(kind, fresh_backend):
    b = fresh_backend(kind)
    with b.open() as plain:
        build(plain).invoke({}, cfg("other"))
    time.sleep(PAST)
    run = lambda *args: CliRunner().invoke(app, [*args, "--db", b.url], env={"COLUMNS": "200"})  # noqa: E731
    swept = run("sweep")
    assert swept.exit_code == 0 and "0 thread(s) expired" in swept.output, swept.output
    bad = run("sweep", "--ttl", "1s")
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1 and "--all-threads" in bad.stderr, bad.stderr
    bad = run("sweep", "--all-threads")
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1 and "--ttl DURATION" in bad.stderr, bad.stderr
    dry = run("sweep", "--all-threads", "--ttl", "1s", "--dry-run")
    assert dry.exit_code == 0 and "would expire other" in dry.output and "nothing deleted" in dry.output, dry.output
    assert _there(b, "other")
    done = run("sweep", "--all-threads", "--ttl", "1s")
    assert done.exit_code == 0 and "1 thread(s) expired" in done.output, done.output
    assert not _there(b, "other")
