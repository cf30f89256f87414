"""OpenTelemetry metrics (threadline.metrics) seen by the SDK's in-memory reader, and the
operational figures of ``threadline stats`` (checkpoints per hour, average checkpoint size,
state size histogram)."""

from __future__ import annotations

import os
import time

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from workers import build_chat

from threadline import metrics, open_saver
from threadline import read as H
from threadline.errors import ConfigError
from threadline.objectstore import Offload


@pytest.fixture
def reader():
    reader = InMemoryMetricReader()
    assert metrics.configure(MeterProvider(metric_readers=[reader]))
    yield reader
    metrics.configure()  # back to the global provider


def points(reader) -> dict[str, list]:
    data = reader.get_metrics_data()
    out: dict[str, list] = {}
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out.setdefault(m.name, []).extend(m.data.data_points)
    return out


def test_every_documented_metric_is_recorded(reader, sync_backend, tmp_path):
    with sync_backend.open(retention={"keep_last": 1}) as saver:
        # values above 60 stored bytes are offloaded and warned about (threadline.values.*)
        saver.blob_codec.offload = Offload(f"file://{tmp_path / 'objects'}", min_bytes=60, warn_bytes=60)
        graph = build_chat().compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "m"}}
        for turn in range(6):  # the messages list grows past the delta threshold: deltas
            graph.invoke({"messages": [f"turn {turn} " + "words " * 60]}, config)
        list(saver.list(config))
        with pytest.raises(ConfigError):
            saver.get_tuple({"configurable": {}})
        report = saver.sweep()
        assert report.ran and report.checkpoints_deleted > 0
    seen = points(reader)
    assert set(metrics.INSTRUMENTS) <= set(seen), set(metrics.INSTRUMENTS) - set(seen)
    system = "postgresql" if sync_backend.is_postgres else "sqlite"
    ops = {p.attributes["threadline.operation"] for p in seen["threadline.operation.duration"]}
    assert ops == {"put", "put_writes", "get_tuple", "list"}
    assert all(p.attributes["db.system"] == system for p in seen["threadline.operation.duration"])
    tables = {p.attributes["threadline.table"]: p.value for p in seen["threadline.bytes_written"]}
    assert set(tables) == {"checkpoints", "blobs", "writes"} and all(v > 0 for v in tables.values())
    kinds = {p.attributes["threadline.blob.kind"]: p.value for p in seen["threadline.blobs.written"]}
    assert kinds["delta"] > 0 and kinds["snapshot"] > 0
    assert max(p.max for p in seen["threadline.delta.chain_depth"]) >= 2
    assert 0 < max(p.max for p in seen["threadline.delta.ratio"]) <= 1
    errors = {(p.attributes["error.type"], p.attributes["threadline.operation"]): p.value for p in seen["threadline.errors"]}
    assert errors == {("ConfigError", "get_tuple"): 1}
    assert [p.value for p in seen["threadline.sweeper.checkpoints_deleted"]] == [report.checkpoints_deleted]
    assert {p.attributes["threadline.sweep.outcome"] for p in seen["threadline.sweeper.runs"]} == {"swept"}


def test_stats_checkpoints_per_hour_average_size_and_histogram(tmp_path):
    with open_saver(str(tmp_path / "s.db")) as saver:
        graph = build_chat().compile(checkpointer=saver)
        for t in range(3):
            graph.invoke({"messages": [os.urandom(1500).hex() if t == 2 else "hi"]}, {"configurable": {"thread_id": f"t{t}"}})
        now = time.time()
        saver.conn.execute("UPDATE threadline_checkpoints SET created_at = ? WHERE thread_id = 't0'", (now - 5 * 3600,))
        s = H.stats(saver, now=now)
        rows = s.tables["checkpoints"]["rows"]
        assert len(s.checkpoints_per_hour) == 24 and sum(h["checkpoints"] for h in s.checkpoints_per_hour) == rows
        assert s.checkpoints_per_hour[-1]["checkpoints"] == rows - 4 and s.checkpoints_per_hour[-6]["checkpoints"] == 4
        assert s.avg_checkpoint_bytes == pytest.approx(sum(t["bytes"] for t in s.tables.values()) / rows, abs=0.1)
        hist = s.state_size_histogram
        assert sum(b["checkpoints"] for b in hist) == rows and hist[0]["min_bytes"] == 0 and hist[-1]["max_bytes"] is None
        assert hist[1]["checkpoints"] > 0  # t2's state holds 3000 bytes of text (1 KiB – 4 KiB)
        assert H.stats(saver, thread_ids=["t1"], now=now).state_size_histogram[0]["checkpoints"] == 4


def test_a_global_provider_set_after_the_first_put_is_recorded_on(tmp_path):
    """A program that does not use OpenTelemetry does not import it. Before any SDK provider is set, a put records nothing (and pays for nothing); the
    global provider set later (``opentelemetry.metrics.set_meter_provider``) receives the next
    put's figures, in a fresh process as an application would start."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f'''
        import sys
        from threadline import SqliteSaver, metrics
        with SqliteSaver.from_conn_string({str(tmp_path / "n.db")!r}) as saver:  # a program without OpenTelemetry
            saver.get_tuple({{"configurable": {{"thread_id": "t"}}}})
            assert "opentelemetry.metrics" not in sys.modules  # not imported for it (a cold start's ~40 ms)
        from opentelemetry import metrics as otel
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from threadline import SqliteSaver, metrics
        with SqliteSaver.from_conn_string({str(tmp_path / "m.db")!r}) as saver:
            cfg = {{"configurable": {{"thread_id": "t", "checkpoint_ns": ""}}}}
            ck = {{"v": 1, "id": "1ef0", "ts": "2024-01-01T00:00:00+00:00", "channel_values": {{}}, "channel_versions": {{}}, "versions_seen": {{}}}}
            saver.put(cfg, ck, {{}}, {{}})
            assert metrics._get() is None
            reader = InMemoryMetricReader()
            otel.set_meter_provider(MeterProvider(metric_readers=[reader]))
            saver.put(cfg, {{**ck, "id": "1ef1"}}, {{}}, {{}})
            names = {{m.name for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics for m in sm.metrics}}
            assert "threadline.operation.duration" in names, names
            print("ok")
    ''')
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
