"""The read models (``threadline.read``) on Redis — plain Redis 7 and the local cluster — give
what they give on SQLite for the same graph history.

One run of the graphs of ``lifecycle_graphs`` (branches, subgraphs, an interrupt) and of the
tool-calling agent of ``cli_support`` (Send tasks) writes to a SQLite saver and a Redis saver at
once (``Tee``: every ``put`` and ``put_writes`` to both, with the same checkpoint ids, versions
and task ids). Every read model is then compared result for result, times aside (each saver
stamps its own clock; compared to within the index's one-second resolution where they matter).
Byte counts are compared exactly: both backends count the same stored bytes — a checkpoint's
JSON text, a blob's and a write's stored value (Postgres counts its JSONB's text, which differs,
so it is not the reference here).
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
import time
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver

from typer.testing import CliRunner

from backends import Backend, make_backend
from cli_support import cli, one_line_error, run_agent
from lifecycle_graphs import build_graph, cfg, populate
from redis_support import RedisTarget
from threadline import read
from threadline.cli import app
from threadline.errors import FilterError, NotFoundError
from threadline.read import names

THREADS = ("t-research", "t-answer", "t-interrupt", "agent-1")
TIMES = {"created", "created_at", "updated", "updated_at"}


class Tee(BaseCheckpointSaver):
    """Every write to both savers (the same arguments; the containers copied), every read from the first."""

    def __init__(self, first: Any, second: Any) -> None:
        super().__init__(serde=first.serde)
        self.first, self.second = first, second
        self.lock = threading.Lock()  # LangGraph writes from several threads: both savers see one order

    def get_tuple(self, config: Any) -> Any:
        return self.first.get_tuple(config)

    def list(self, config: Any, **kwargs: Any) -> Any:
        return self.first.list(config, **kwargs)

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        copied = {**checkpoint, "channel_values": dict(checkpoint.get("channel_values") or {})}
        with self.lock:
            self.second.put(config, copied, dict(metadata), dict(new_versions))
            return self.first.put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        writes = copy.deepcopy(list(writes))  # one snapshot: LangGraph's reducers may go on changing the values
        with self.lock:
            self.second.put_writes(config, list(writes), task_id, task_path)
            self.first.put_writes(config, writes, task_id, task_path)

    def get_next_version(self, current: Any, channel: Any) -> Any:
        return self.first.get_next_version(current, channel)


def timeless(value: Any) -> Any:
    """``value`` (JSON) without its timestamps."""
    if isinstance(value, dict):
        return {k: timeless(v) for k, v in value.items() if k not in TIMES}
    if isinstance(value, list):
        return [timeless(v) for v in value]
    return value


# Stored sizes of checkpoint documents: SQLite keeps their versions compacted (``jsontext.compact_doc``),
# Redis as LangGraph wrote them (its rows are zstd-compressed as a whole)
DOC_BYTES = frozenset({"avg_checkpoint_bytes", "checkpoint_bytes"})


def sizeless(value: Any) -> Any:
    """``value`` (JSON) without the stored sizes of checkpoint documents (``DOC_BYTES``, the checkpoints
    table's ``bytes``)."""
    if isinstance(value, dict):
        return {
            k: ({c: n for c, n in v.items() if c != "bytes"} if k == "checkpoints" and isinstance(v, dict) and "rows" in v else sizeless(v))
            for k, v in value.items() if k not in DOC_BYTES
        }
    if isinstance(value, list):
        return [sizeless(v) for v in value]
    return value


def same(a: Any, b: Any) -> None:
    """Two results (or lists of them) equal as JSON, times and document sizes aside."""
    as_json = (lambda x: [i.to_json() for i in x]) if isinstance(a, list) else (lambda x: x.to_json())
    assert timeless(sizeless(as_json(b))) == timeless(sizeless(as_json(a)))


class Pair(NamedTuple):
    """One history on SQLite (``a``, at ``sqlite``) and on Redis (``b``, at ``redis``)."""

    a: Any
    b: Any
    sqlite: Backend
    redis: Backend
    facts: dict[str, Any]


@pytest.fixture(params=("redis", "redis-cluster"))
def pair(request: pytest.FixtureRequest, tmp_path: Path):
    """A ``Pair``: one history (``lifecycle_graphs.populate`` and the agent) written to both."""
    sqlite = make_backend("sqlite", tmp_path, request)
    redis = make_backend(request.param, tmp_path, request)
    with sqlite.open() as a, redis.open() as b:
        tee = Tee(a, b)
        facts = populate(tee)
        run_agent(tee)
        yield Pair(a, b, sqlite, redis, facts)


def test_threads_listing(pair):
    a, b = pair.a, pair.b
    now = time.time()
    for kwargs in ({}, {"metadata": {"user": "ada"}}, {"metadata": {"user": "nobody"}}, {"idle_for": 3600},
                   {"idle_for": 3600, "now": now + 7200}, {"active_within": 3600}, {"thread_ids": ["t-answer", "agent-1", "nope"]},
                   {"thread_ids": []}, {"limit": 2}, {"limit": 2, "offset": 2}, {"limit": 1, "offset": 9},
                   {"order_by": "bytes"}, {"order_by": "created"}, {"order_by": "thread_id"}):
        pa, pb = read.list_threads(a, **kwargs), read.list_threads(b, **kwargs)
        same(pa, pb)
        for x, y in zip(pa.threads, pb.threads):
            assert abs(x.created_at - y.created_at) < 1 and abs(x.updated_at - y.updated_at) < 1.5
    page = read.list_threads(b)
    assert page.total == 4 and all(t.head_checkpoint_id and t.bytes > 0 for t in page.threads)
    assert b.run(read.all_thread_ids_op(b.dialect)) == a.run(read.all_thread_ids_op(a.dialect)) == sorted(THREADS)


def test_history_state_and_diff(pair):
    a, b, facts = pair.a, pair.b, pair.facts
    for tid in THREADS:
        for subgraphs in (False, True):
            same(read.thread_history(a, tid, include_subgraphs=subgraphs), read.thread_history(b, tid, include_subgraphs=subgraphs))
        same(read.state_at(a, tid), read.state_at(b, tid))
        ids = [n.checkpoint_id for n in read.thread_history(a, tid).ordered()]
        for cid in ids:
            same(read.state_at(a, tid, cid), read.state_at(b, tid, cid))
        for x, y in zip(ids, ids[1:]):
            for internal in (False, True):
                same(read.diff(a, tid, x, y, include_internal=internal), read.diff(b, tid, x, y, include_internal=internal))
    sub = next(ns for ns in read.thread_history(a, "t-research", include_subgraphs=True).nodes if ns)
    same(read.thread_history(a, "t-research", checkpoint_ns=sub), read.thread_history(b, "t-research", checkpoint_ns=sub))
    head_a, head_b = read.state_at(a, "t-answer").checkpoint_id, read.state_at(a, "t-research").checkpoint_id
    same(read.diff(a, "t-answer", head_a, head_b, thread_b="t-research"), read.diff(b, "t-answer", head_a, head_b, thread_b="t-research"))
    interrupted = read.state_at(b, "t-interrupt")
    assert interrupted.next == ["approve"] and interrupted.interrupts[0]["value"] == {"question": "approve the answer?"}
    with_graph = read.state_at(b, "t-interrupt", graph=build_graph())
    assert read.jsonable(with_graph.values) == read.jsonable(build_graph(b).get_state(cfg("t-interrupt")).values)
    assert facts["fork_point"] in read.thread_history(b, "t-research").fork_points
    for bad in (lambda s: read.thread_history(s, "nope"), lambda s: read.state_at(s, "t-answer", "1f000000-0000-6000-8000-000000000000")):
        with pytest.raises(NotFoundError) as ea:
            bad(a)
        with pytest.raises(NotFoundError) as eb:
            bad(b)
        assert str(eb.value) == str(ea.value)


def test_audit_and_task_stats(pair):
    a, b = pair.a, pair.b
    for tid in THREADS:
        for kwargs in ({}, {"checkpoint_ns": None}, {"limit": 3, "offset": 2}):
            same(read.audit(a, tid, **kwargs), read.audit(b, tid, **kwargs))
        for node in read.thread_history(a, tid).ordered():
            same(read.audit(a, tid, node.checkpoint_id), read.audit(b, tid, node.checkpoint_id))
            same(read.task_stats(a, tid, node.checkpoint_id), read.task_stats(b, tid, node.checkpoint_id))
        same(read.task_stats(a, tid), read.task_stats(b, tid))
    for kwargs in ({}, {"checkpoint_ns": None}, {"since": time.time() + 60}):
        same(read.task_stats(a, **kwargs), read.task_stats(b, **kwargs))
    tools = [w for w in read.audit(b, "agent-1") if w.node == "tools"]  # Send tasks, attributed
    assert len({w.task_id for w in tools}) == 3
    assert any(t.node == "tools" and t.tasks == 3 for t in read.task_stats(b, "agent-1").tasks)


def test_latest_values(pair):
    a, b = pair.a, pair.b
    for args, kwargs in ((("messages",), {}), (("messages", ["t-answer", "agent-1", "nope"]), {}), (("route",), {}),
                         (("approved", ["t-interrupt"]), {}), (("messages",), {"limit": 2}), (("messages",), {"limit": 0})):
        la, lb = read.latest_values(a, *args, **kwargs), read.latest_values(b, *args, **kwargs)
        same(la, lb)
    assert [r.thread_id for r in read.latest_values(b, "messages")] == sorted(THREADS)
    assert read.latest_values(b, "approved", ["t-interrupt"])[0].present is False


def test_stats(pair):
    a, b = pair.a, pair.b
    now = time.time()
    for kwargs in ({}, {"thread_ids": ["t-research", "agent-1"]}, {"thread_ids": []}, {"top": 0}):
        same(read.stats(a, now=now, **kwargs), read.stats(b, now=now, **kwargs))
    s = read.stats(b, now=now)
    assert 0 < read.stats(a, now=now).tables["checkpoints"]["bytes"] < s.tables["checkpoints"]["bytes"]  # compacted on SQLite
    assert s.threads == 4 and s.namespaces > 4 and s.references > s.tables["blobs"]["rows"] > 0
    assert sum(h["checkpoints"] for h in s.checkpoints_per_hour) == s.tables["checkpoints"]["rows"]


def test_names(pair):
    a, b, facts = pair.a, pair.b, pair.facts
    fork = facts["fork_point"]
    for name in ("HEAD", "HEAD~", "HEAD~2", "step:1", fork, fork[-8:], f"…{fork[-8:]}"):
        assert names.resolve_checkpoint(b, "t-research", name) == names.resolve_checkpoint(a, "t-research", name) != ""
    for patterns in (["t-*"], ["*"], ["t-answer", "agent-?"], ["t-[ai]*"]):
        assert names.expand_threads(b, patterns) == names.expand_threads(a, patterns)
    for call in (lambda s: names.resolve_checkpoint(s, "nope", "HEAD"), lambda s: names.resolve_checkpoint(s, "t-research", "step:999"),
                 lambda s: names.expand_threads(s, ["x*"]), lambda s: names.resolve_thread(s, "nope")):
        with pytest.raises(NotFoundError) as ea:
            call(a)
        with pytest.raises(NotFoundError) as eb:
            call(b)
        assert str(eb.value) == str(ea.value)
    with pytest.raises(names.AmbiguousNameError):
        names.resolve_checkpoint(b, "t-research", read.thread_history(b, "t-research").head[:8])


def test_bad_input_is_one_threadline_error(pair):
    b = pair.b
    with pytest.raises(FilterError):
        read.list_threads(b, metadata={1: "x"})
    with pytest.raises(FilterError):
        read.list_threads(b, metadata={"user": float("nan")})
    with pytest.raises(ValueError, match="order_by"):
        read.list_threads(b, order_by="size")
    with pytest.raises(ValueError, match="limit"):
        read.list_threads(b, limit=0)


def test_a_thread_whose_keys_expired_is_gone(pair):
    """Redis expires a thread's six keys together (its TTL); the index keeps its id until the next
    put or delete, and no read model shows the thread meanwhile."""
    b = pair.b
    with raw(pair.redis) as target:
        client = target.client()
        for key in b.dialect.keys("t-answer"):
            client.delete(key)
        assert client.zscore(b.dialect.index, "t-answer") is not None
    assert "t-answer" not in [t.thread_id for t in read.list_threads(b).threads]
    assert read.list_threads(b).total == 3 and read.stats(b).threads == 3
    assert read.latest_values(b, "messages", ["t-answer"]) == []
    assert names.expand_threads(b, ["t-*"]) == ["t-interrupt", "t-research"]
    with pytest.raises(NotFoundError, match="unknown thread 't-answer'"):
        names.resolve_thread(b, "t-answer")


def _cli(*args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert result.exit_code == code, (args, result.output, result.exception)
    return result


def _cli_json(*args: str) -> Any:
    return json.loads(_cli(*args, "--json").stdout)


@contextmanager
def raw(backend: Backend) -> Iterator[RedisTarget]:
    """The ``RedisTarget`` of a Redis ``Backend`` (its URL without the ``prefix`` make_backend
    added), its clients closed on exit (its keys stay: the test's own target deletes them)."""
    server, _, prefix = backend.url.rpartition("prefix=")
    target = RedisTarget("cluster" if "cluster" in backend.kind else "redis", server[:-1], prefix)
    try:
        yield target
    finally:
        for client in target._clients:
            client.close()


def _stored(backend: Backend) -> dict[bytes, tuple]:
    """Every key under the backend's prefix: its content (hash or sorted set) and expiry."""
    with raw(backend) as target:
        client = target.client()
        read_key = {b"hash": client.hgetall, b"zset": lambda k: client.zrange(k, 0, -1, withscores=True)}
        return {key: (read_key[client.type(key)](key), client.pttl(key)) for key in target.keys()}


def test_cli_read_commands_on_redis(pair):
    """``threadline threads|history|show|diff|latest|audit|stats --db redis://…?prefix=…`` print
    what they print on the SQLite database of the same history, and write nothing."""
    before = _stored(pair.redis)
    fork = pair.facts["fork_point"]
    for args in (("threads",), ("threads", "--where", "user=ada"), ("threads", "--limit", "1", "--offset", "1", "--order", "bytes"),
                 ("history", "t-research", "--subgraphs"), ("show", "t-interrupt"), ("show", "agent-1", "HEAD~2"),
                 ("show", "t-research", fork[-8:]), ("diff", "t-research", "HEAD~3", "HEAD"), ("diff", "agent-1", "step:1", "HEAD"),
                 ("latest", "messages"), ("latest", "route", "t-*"), ("audit", "agent-1"), ("audit", "t-research", "--all-ns"),
                 ("audit", "t-research", fork), ("audit",), ("stats",), ("stats", "--top", "1")):
        on_sqlite = _cli_json(*args, "--db", pair.sqlite.url)
        on_redis = _cli_json(*args, "--db", pair.redis.url)
        assert timeless(sizeless(on_redis)) == timeless(sizeless(on_sqlite)), args
    for args in (("threads",), ("history", "t-research", "--subgraphs"), ("show", "t-interrupt"), ("diff", "t-answer", "HEAD~1", "HEAD"),
                 ("latest", "messages"), ("audit", "agent-1"), ("stats",)):
        assert _cli(*args, "--db", pair.redis.url).stdout.strip()
    assert "HEAD~99" in _cli("diff", "t-research", "HEAD~99", "HEAD", "--db", pair.redis.url, code=2).output
    proc = cli("show", "t-interrupt", "--db", pair.redis.url)  # a real process
    assert proc.returncode == 0 and "approve" in proc.stdout and not proc.stderr.strip(), proc.stderr
    one_line_error(cli("show", "nope", "--db", pair.redis.url), 2, "nope")
    assert _stored(pair.redis) == before  # read-only: not even a TTL refresh


def test_cli_on_a_redis_that_is_down():
    one_line_error(cli("threads", "--db", "redis://127.0.0.1:1/0?prefix=x"), 1, "Redis")


@pytest.mark.parametrize("kind", ["redis-async", "redis-cluster-async"])
async def test_read_models_on_async_redis(kind: str, tmp_path: Path, request: pytest.FixtureRequest):
    backend = make_backend(kind, tmp_path, request)
    with backend.open(is_async=False) as saver:
        populate(saver)
        page = read.list_threads(saver)
        stats = read.stats(saver, now=1e9)
        tree = read.thread_history(saver, "t-research", include_subgraphs=True)
        audit = read.audit(saver, "t-research", checkpoint_ns=None)
    async with backend.open() as saver:
        d = saver.dialect
        same(page, await saver.arun(read.threads_op(d)))
        same(stats, await saver.arun(read.stats_op(d, now=1e9)))
        same(tree, await saver.arun(read.history_op(d, "t-research", include_subgraphs=True)))
        same(audit, await saver.arun(read.audit_op(d, "t-research", checkpoint_ns=None)))
        latest = await saver.arun(read.latest_op(d, saver.serde, "route", ["t-answer"]))
        assert latest[0].value == "answer"


def test_read_package_holds_no_sql_and_no_backend_branch():
    package = Path(read.__file__).parent
    for path in sorted(package.glob("*.py")):
        source = path.read_text()
        assert not re.search(r"\b(SELECT|INSERT|UPDATE|DELETE)\b|FROM threadline_", source), path.name
        assert not re.search(r"\.name\s*[=!]=|\b(SQLITE|POSTGRES|RedisDialect|SqliteDialect|PostgresDialect)\b", source), path.name
