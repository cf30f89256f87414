"""Postgres at scale: monthly partitions of checkpoints/writes (threadline.lifecycle.partition)
that the sweeper drops once retention empties them; pools that survive killed connections."""

from __future__ import annotations

import datetime as dt
import secrets
import time

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from workers import build_chat, expected_state, user_message

from threadline import PostgresSaver, open_saver
from threadline import lifecycle as L
from threadline import read as H
from threadline.errors import ConfigError
from threadline.lifecycle import partition as P


def old_id(months_ago: int, n: int) -> str:
    """A UUIDv6 checkpoint id made ``months_ago`` months ago (n orders ids of one month)."""
    when = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None, day=1) - dt.timedelta(days=31 * months_ago - 5)
    base = P.id_at(when + dt.timedelta(seconds=n))
    return base[:19] + f"{0x8000 + n:04x}-{secrets.token_hex(6)}"


def every_tuple(saver) -> dict:
    return {
        (t.config["configurable"]["thread_id"], t.config["configurable"]["checkpoint_id"]): H.jsonable(
            (t.checkpoint["channel_values"], t.pending_writes, t.parent_config)
        )
        for t in saver.list(None)
    }


def test_month_of_and_bounds_agree_with_langgraph_ids():
    from langgraph.checkpoint.base.id import uuid6

    now = dt.datetime.now(dt.timezone.utc)
    cid = str(uuid6(clock_seq=1))
    assert P.month_of(cid) == now.date().replace(day=1)
    lo, hi = P._bounds(now.date().replace(day=1))
    assert lo <= cid < hi
    assert P.month_of("not-a-uuid") is None


def test_partitioned_tables_keep_everything_and_drop_emptied_months(pg_url):
    with open_saver(pg_url) as saver:
        graph = build_chat().compile(checkpointer=saver)
        graph.invoke({"messages": ["hello"]}, {"configurable": {"thread_id": "now"}})
        # a thread that started two months ago and goes on today
        config = {"configurable": {"thread_id": "long", "checkpoint_ns": ""}}
        version = None
        for i in range(3):
            version = saver.get_next_version(version, None)
            ck = {**empty_checkpoint(), "id": old_id(2, i), "channel_values": {"messages": [f"old {i}"]}, "channel_versions": {"messages": version}}
            config = saver.put(config, ck, {"source": "loop", "step": i, "parents": {}}, {"messages": version})
            saver.put_writes(config, [("messages", f"pending {i}")], f"task-{i}")
        saver.run(_age("long", time.time() - 60 * 86400), write=True)
        graph.invoke({"messages": ["today"]}, {"configurable": {"thread_id": "long"}})
        before = every_tuple(saver)
        report = P.partition(saver)
        assert report.rows["checkpoints"] == len(before) and report.rows["writes"] > 0
        months = [n for n in report.created if n.startswith("threadline_checkpoints_y")]
        assert len(months) == 6  # two months ago … three months ahead
        assert every_tuple(saver) == before
        assert P.partition(saver).rows == {}  # idempotent
        graph.invoke({"messages": ["after partitioning"]}, {"configurable": {"thread_id": "now"}})
        assert graph.get_state({"configurable": {"thread_id": "now"}}).values["messages"][-1] == "reply to after partitioning"
        old_month = months[0]
        assert saver.run(_count(old_month)) == 3
        # retention empties the old month; the sweep drops it, whose rows never need a VACUUM
        saver.retention = L.RetentionPolicy(older_than=30 * 86400)
        swept = saver.sweep()
        assert swept.checkpoints_deleted == 3 and old_month in swept.partitions_dropped
        assert old_month not in saver.run(P._partitions_op(saver.dialect, "checkpoints"))
        after = every_tuple(saver)
        assert {k: v for k, v in before.items() if k[0] == "now"} == {k: v for k, v in after.items() if k[0] == "now" and k in before}
        assert L.fsck(saver, deep=True).ok


def test_partitions_are_postgres_only(tmp_path):
    with open_saver(str(tmp_path / "p.db")) as saver:
        with pytest.raises(ConfigError, match="Postgres"):
            P.partition(saver)


def test_pool_survives_killed_connections(pg_url):
    name = f"tl_pool_{secrets.token_hex(4)}"
    url = f"{pg_url}&application_name={name}"
    with PostgresSaver.from_conn_string(url, pool_size=2) as saver:
        graph = build_chat().compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "p"}}
        graph.invoke({"messages": ["before"]}, config)
        assert saver.conn.kwargs["prepare_threshold"] == 0  # as the official from_conn_string
        with psycopg.connect(pg_url, autocommit=True) as admin:
            killed = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", (name,)).fetchall()
        assert killed
        graph.invoke({"messages": ["after"]}, config)  # the pool checks connections before lending them
        assert graph.get_state(config).values["turns"] == 2


@pytest.mark.parametrize(("threshold", "prepared"), [({}, True), ({"prepare_threshold": None}, False)])
def test_statements_are_prepared_as_the_official_saver_does_unless_told_not_to(pg_url, threshold, prepared):
    """``from_conn_string`` prepares statements on the server (``prepare_threshold=0``, the
    official saver's setting); ``prepare_threshold=None`` prepares none (PgBouncer)."""
    with PostgresSaver.from_conn_string(pg_url, **threshold) as saver:
        graph = build_chat().compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "prepared"}}
        graph.invoke({"messages": ["hi"]}, config)
        assert graph.get_state(config).values["turns"] == 1
        (count,) = saver.conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
        assert (count > 0) is prepared, count


def test_pipeline_mode_survives_a_rollback_and_ddl(pg_url):
    """psycopg in pipeline mode loses a statement it has just prepared after a ROLLBACK or DDL;
    threadline does not prepare pipelined statements, so its operations go on working."""
    with PostgresSaver.from_conn_string(pg_url, pipeline=True) as saver:
        graph = build_chat().compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "piped-rollback"}}
        graph.invoke({"messages": ["one"]}, config)
        with pytest.raises(RuntimeError), saver.conn.transaction():
            saver.conn.execute("SELECT 1", prepare=False)
            raise RuntimeError("the application rolls back")
        saver.conn.execute("ALTER TABLE threadline_threads SET (fillfactor = 70)", prepare=False)
        for turn in range(2):
            graph.invoke({"messages": [f"turn {turn}"]}, config)
        assert graph.get_state(config).values["turns"] == 3


def _age(thread_id, when):
    from threadline.storage.ops import Q

    yield Q("UPDATE threadline_checkpoints SET created_at = ? WHERE thread_id = ?", (when, thread_id))


def _count(table):
    from threadline.storage.ops import Q

    return (yield Q(f"SELECT COUNT(*) FROM {table}"))[0][0]


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_pipe_set_after_opening_is_used(pg_url, durability):
    """LangGraph's own Postgres fixtures open the saver, then set ``saver.pipe`` inside
    ``saver.conn.pipeline()``: every operation must run through that pipeline."""
    with PostgresSaver.from_conn_string(pg_url) as saver, saver.conn.pipeline() as pipe:
        saver.pipe = pipe
        graph = build_chat().compile(checkpointer=saver)
        config = {"configurable": {"thread_id": f"piped-{durability}"}}
        for turn in range(2):
            graph.invoke({"messages": [user_message("piped", turn)]}, config, durability=durability)
        assert graph.get_state(config).values == expected_state("piped", 2)


async def test_async_pipe_set_after_opening_is_used(pg_url):
    from threadline import AsyncPostgresSaver

    async with AsyncPostgresSaver.from_conn_string(pg_url) as saver, saver.conn.pipeline() as pipe:
        saver.pipe = pipe
        graph = build_chat().compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "apiped"}}
        for turn in range(2):
            await graph.ainvoke({"messages": [user_message("apiped", turn)]}, config)
        assert (await graph.aget_state(config)).values == expected_state("apiped", 2)


@pytest.mark.parametrize("statement", ["put_statement", "get_statement", "blob_chains", "writes_by_keys"])
def test_cached_plans_probe_rows_by_key(pg_url, statement):
    """The plans Postgres caches for ``put``, ``get_tuple`` and key-list reads (generic plans,
    made once while the tables are small) look stored rows up by key: a hashed subplan or hash
    join over a scan of a table would read all of it on every call until it is analyzed again."""
    from threadline.storage.dialect.postgres import PostgresDialect

    with PostgresSaver.from_conn_string(pg_url) as saver:
        saver.setup()
        sql = getattr(PostgresDialect(), statement)(True if statement == "get_statement" else 3)
        params = sql.count("?")
        numbered = iter(range(1, params + 1))
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("SET plan_cache_mode = force_generic_plan")
            conn.execute("PREPARE cached AS " + PostgresDialect().sql(sql).replace("%s", "$%d") % tuple(numbered))
            plan = "\n".join(r[0] for r in conn.execute(f"EXPLAIN EXECUTE cached({', '.join(['NULL'] * params)})"))
    assert "Index Scan using threadline_" in plan, plan
    assert "Seq Scan on threadline_" not in plan, plan


def test_puts_of_a_busy_thread_update_its_index_row_in_place(pg_url):
    """A thread's ``threads`` row changes with every put (counts, bytes), but its indexed
    ``updated_at`` moves only by a second or more: within a second Postgres updates the row in
    place (HOT), without a new index entry and a dead row version per put."""
    puts = 30
    with PostgresSaver.from_conn_string(pg_url) as saver:
        saver.setup()
        config = {"configurable": {"thread_id": "busy", "checkpoint_ns": ""}}
        first = time.time()
        for i in range(puts):
            version = saver.get_next_version(None if i == 0 else str(i), None)
            ck = {**empty_checkpoint(), "channel_values": {"n": i}, "channel_versions": {"n": version}}
            config = saver.put(config, ck, {"source": "loop", "step": i, "parents": {}}, ck["channel_versions"])
        last = time.time()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            updated_at, count = conn.execute("SELECT updated_at, checkpoint_count FROM threadline_threads WHERE thread_id = 'busy'").fetchone()
    assert count == puts and first <= updated_at <= last and last - updated_at < 1.0 + (last - first)
    # the saver's backend flushes its table statistics when its connection ends
    deadline = time.time() + 15
    while True:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            updates, hot = conn.execute(
                "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = 'threadline_threads'::regclass"
            ).fetchone()
        if updates >= puts - 1 or time.time() > deadline:
            break
        time.sleep(0.2)
    assert updates == puts - 1
    seconds_crossed = int(last) - int(first) + 1  # each second boundary may move updated_at once
    assert hot >= updates - seconds_crossed, (updates, hot)
