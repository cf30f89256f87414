"""Parquet export (dt partitions, read back with DuckDB) and import from LangGraph's official savers."""

from __future__ import annotations

import json
import os

import duckdb
import pyarrow.parquet as pq
import pytest
from langgraph.checkpoint.sqlite import SqliteSaver as OfficialSqliteSaver

from lifecycle_graphs import build_graph, cfg, graph, populate
from threadline import ThreadlineError, open_saver
from threadline.transfer import export as X
from threadline.transfer import official as O
from threadline import read as H
from threadline import lifecycle as L


def test_export_parquet_partitions_by_date_and_duckdb_reads_it(db, tmp_path):
    backend, _ = db
    url = backend.url
    # spread checkpoints and writes over two days
    backend.sql("UPDATE threadline_checkpoints SET created_at = created_at - 86400 WHERE thread_id = ?", ("t-answer",))
    backend.sql("UPDATE threadline_writes SET created_at = created_at - 86400 WHERE thread_id = ?", ("t-answer",))
    out = str(tmp_path / "pq")
    with open_saver(url) as saver:
        seen = []
        report = X.export_parquet(saver, out, progress=lambda d, t, tid: seen.append(d))
        stats = H.stats(saver)
    assert seen == [1, 2, 3]
    assert report.rows == {t: stats.tables[t]["rows"] for t in ("checkpoints", "writes", "blobs")}
    assert len(report.partitions["checkpoints"]) == 2 and len(report.partitions["writes"]) == 2
    for table in ("checkpoints", "writes", "blobs"):
        dirs = sorted(os.listdir(os.path.join(out, table)))
        assert dirs and all(d.startswith("dt=") for d in dirs)
    ck = pq.read_table(os.path.join(out, "checkpoints")).to_pylist()
    assert len(ck) == stats.tables["checkpoints"]["rows"]
    assert all(json.loads(r["channel_versions"]) for r in ck if r["source"] == "loop")
    con = duckdb.connect()
    writes = f"read_parquet('{out}/writes/*/*.parquet', hive_partitioning = true)"
    per_node = dict(con.execute(f"SELECT node, COUNT(*) FROM {writes} WHERE checkpoint_ns = '' GROUP BY node").fetchall())
    with open_saver(url) as saver:
        expected = {t.node: t.writes for t in H.task_stats(saver).tasks}
    assert per_node == expected
    day = max(report.partitions["writes"])
    n = con.execute(f"SELECT COUNT(*) FROM {writes} WHERE dt = ?", [day]).fetchone()[0]
    assert 0 < n < report.rows["writes"]
    total = con.execute(f"SELECT SUM(bytes) FROM read_parquet('{out}/blobs/*/*.parquet', hive_partitioning = true)").fetchone()[0]
    assert total == stats.tables["blobs"]["bytes"]
    # the seed's "latest files per thread" query, answered correctly through the head checkpoint
    head_sql = (
        f"SELECT thread_id, json_extract_string(channel_versions, '$.messages') AS v FROM "
        f"read_parquet('{out}/checkpoints/*/*.parquet', hive_partitioning = true) WHERE checkpoint_ns = '' "
        "QUALIFY ROW_NUMBER() OVER (PARTITION BY thread_id ORDER BY checkpoint_id DESC) = 1"
    )
    heads = dict(con.execute(head_sql).fetchall())
    with open_saver(url) as saver:
        assert heads == {r.thread_id: r.version for r in H.latest_values(saver, "messages")}
        # re-export replaces the datasets
        again = X.export_parquet(saver, out, thread_ids=["t-answer"])
    assert again.rows["checkpoints"] == pq.read_table(os.path.join(out, "checkpoints")).num_rows


def test_export_needs_a_directory(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with open_saver(str(tmp_path / "x.db")) as saver:
        with pytest.raises(ThreadlineError):
            X.export_parquet(saver, str(f))


def test_import_official_sqlite_database(sync_backend, tmp_path):
    source = str(tmp_path / "official.db")
    with OfficialSqliteSaver.from_conn_string(source) as official:
        populate(official)
        official_graph = build_graph(official)
        expected = {t: official_graph.get_state(cfg(t)) for t in ("t-research", "t-answer", "t-interrupt")}
    with open_saver(sync_backend.url) as saver:
        report = O.import_langgraph(source, saver, graph=graph)
        assert report.ok and len(report.threads) == 3
        assert all(t.verified and not t.mismatches for t in report.threads)
        assert sum(t.checkpoints for t in report.threads) == sync_backend.sql("SELECT COUNT(*) FROM threadline_checkpoints")[0][0]
        g = build_graph(saver)
        for tid, snap in expected.items():
            mine = g.get_state(cfg(tid))
            assert H.jsonable(mine.values) == H.jsonable(snap.values)
            assert mine.next == snap.next and mine.config == snap.config
        # task_path and idx survive, so audit names the nodes
        assert {w.node for w in H.audit(saver, "t-research")} >= {"classify", "search_a", "search_b", "merge"}
        # blobs are shared: fewer blob rows than channel references
        s = H.stats(saver)
        assert s.dedup_ratio > 1
        assert L.fsck(saver, deep=True).ok
        # imported threads keep working with LangGraph
        out = g.invoke(__import__("langgraph.types", fromlist=["Command"]).Command(resume=True), cfg("t-interrupt"))
        assert out["approved"] is True
        with pytest.raises(ThreadlineError, match="already exists"):
            O.import_langgraph(source, saver, thread_ids=["t-answer"])
        again = O.import_langgraph(source, saver, thread_ids=["t-answer"], replace=True)
        assert again.ok


def test_import_rejects_non_langgraph_files(tmp_path):
    with open_saver(str(tmp_path / "threadline.db")) as saver:
        populate(saver)
        with pytest.raises(ThreadlineError):
            O.import_langgraph(str(tmp_path / "threadline.db"), saver)  # a threadline db, not an official one
        with pytest.raises(ThreadlineError):
            O.import_langgraph(str(tmp_path / "missing.db"), saver)


def test_import_official_postgres_database(pg_url, tmp_path):
    from langgraph.checkpoint.postgres import PostgresSaver as OfficialPostgresSaver

    with OfficialPostgresSaver.from_conn_string(pg_url) as official:
        official.setup()
        populate(official)
    with open_saver(str(tmp_path / "from-pg.db")) as saver:
        report = O.import_langgraph(pg_url, saver, graph=graph)
        assert report.ok and len(report.threads) == 3, report.to_json()
