"""Parquet export with values: seed 000's warehouse query (the latest ``messages`` of every
thread, by ``dt``) runs in DuckDB on the export and agrees with ``read.latest_values``."""

from __future__ import annotations

import json

import duckdb

from threadline import open_saver
from threadline import read as H
from threadline.transfer import export as X


def test_warehouse_query_latest_messages_per_thread_in_duckdb(db, tmp_path):
    backend, _ = db
    out = str(tmp_path / "pq")
    with open_saver(backend.url) as saver:
        report = X.export_parquet(saver, out, values=True)
        latest = {r.thread_id: r for r in H.latest_values(saver, "messages")}
    con = duckdb.connect()
    blobs = f"read_parquet('{out}/blobs/*/*.parquet', hive_partitioning = true)"
    day = min(report.partitions["blobs"])
    # seed 000, as written: per thread the largest messages version in the dt range
    seed = dict(
        (tid, json.loads(value))
        for tid, value in con.execute(
            f"SELECT thread_id, value FROM (SELECT thread_id, value, ROW_NUMBER() OVER (PARTITION BY thread_id ORDER BY version DESC) AS rn "
            f"FROM {blobs} WHERE checkpoint_ns = '' AND channel = 'messages' AND dt >= ? AND dt <= ?) t WHERE rn = 1 ORDER BY thread_id",
            [day, max(report.partitions["blobs"])],
        ).fetchall()
    )
    # threads without branches: the largest version is the head's
    for tid in ("t-answer", "t-interrupt"):
        assert seed[tid] == H.jsonable(latest[tid].value)
    # any thread, branches too: the version the head checkpoint names
    checkpoints = f"read_parquet('{out}/checkpoints/*/*.parquet', hive_partitioning = true)"
    heads = dict(
        (tid, json.loads(value))
        for tid, value in con.execute(
            f"WITH head AS (SELECT thread_id, json_extract_string(channel_versions, '$.messages') AS version FROM {checkpoints} "
            "WHERE checkpoint_ns = '' QUALIFY ROW_NUMBER() OVER (PARTITION BY thread_id ORDER BY checkpoint_id DESC) = 1) "
            f"SELECT b.thread_id, b.value FROM head JOIN {blobs} b ON b.thread_id = head.thread_id AND b.checkpoint_ns = '' "
            "AND b.channel = 'messages' AND b.version = head.version"
        ).fetchall()
    )
    assert heads == {tid: H.jsonable(r.value) for tid, r in latest.items()}
    assert heads["t-research"][-1]["content"]  # messages, as LangChain messages' fields
    # pending writes carry their values too
    writes = f"read_parquet('{out}/writes/*/*.parquet', hive_partitioning = true)"
    interrupt = con.execute(f"SELECT value FROM {writes} WHERE thread_id = 't-interrupt' AND channel = '__interrupt__'").fetchone()[0]
    assert "approve the answer?" in interrupt
    # without values the export has no value column
    with open_saver(backend.url) as saver:
        X.export_parquet(saver, out)
    assert "value" not in {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {blobs}").fetchall()}
