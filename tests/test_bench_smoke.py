"""The run, scale, concurrency, seed 002, per-call and LangGraph-graphs benchmarks run at a tiny size (no timing is asserted):
their workloads read back through the real graph, and their reports render."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))

from backends import postgres_unavailable  # noqa: E402


def _args(**kw: Any) -> argparse.Namespace:
    base = {"threads": 4, "steps": 3, "big": 30, "block": 2, "prune": 2, "json_dir": None}
    return argparse.Namespace(**{**base, **kw})


def test_long_thread_is_what_langgraph_writes(tmp_path: Path) -> None:
    """The synthesized long thread loads through the real graph, and its first supersteps
    are the real graph's own calls."""
    import scale_workload as SW

    from threadline import SqliteSaver

    calls = list(SW.long_thread("x", 40))
    assert sum(k == "put" for k, _, _ in calls) == 42
    real = [(k, a[2] if k == "put" else None) for k, a, s in SW._record(SW.small_graph(SW.PREFIX + 2, True, 2), "x") if s < SW.PREFIX]
    assert [(k, a[2] if k == "put" else None) for k, a, _ in calls[: len(real)]][: len(real) - 1] == real[: len(real) - 1]
    with SqliteSaver.from_conn_string(str(tmp_path / "x.db")) as saver:
        for kind, args, _ in calls:
            getattr(saver, kind)(*args)
        SW.check_long_thread(saver, "x", 40)


@pytest.mark.parametrize("name", ["sqlite-official", "sqlite"])
def test_scale_child_tiny(name: str) -> None:
    import scale
    import scale_report

    res = scale.child(_args(child=name))
    assert res["populate"]["checkpoints"] == 4 * 5 and res["long"]["steps"] == 30
    assert res["checkpoints"] == 4 * 5 + 32
    if name == "sqlite":
        assert res["prune"]["keep_latest"]["removed"] == 2 * 4  # two threads of 5 keep 1 each
        assert 0 < res["cache"]["bytes"] <= res["cache"]["max_bytes"]
    else:
        assert res["prune"] == {"note": "no prune"}
    md = scale_report.render([res], _args(), "- machine")
    assert "| populate: checkpoints/s" in md


def test_seed002_tiny(tmp_path: Path) -> None:
    import seed002

    rows = seed002.batching("sqlite", 3, 2, str(tmp_path))
    assert len(rows) == 3 and all(rate > 0 for _, rate, _ in rows)
    found = seed002.cached("sqlite", 3, str(tmp_path))
    assert found["stale_writes"] > 0  # the seed's cache misses pending writes written after the put
    assert "§8.2" in seed002.render({"sqlite": (rows, found)}, argparse.Namespace(threads=3, steps=3))


def test_concurrency_tiny() -> None:
    import concurrency

    res = concurrency._sqlite_run(False, processes=2, threads=1, steps=2)
    assert res["errors"] == 0 and res["complete"] == 2 and res["checkpoints"] == 2 * 4
    if postgres_unavailable() is None:
        res = asyncio.run(concurrency._pg_run(False, graphs=3, pool_size=2, steps=2, suffix=f"_smoke_{os.getpid()}"))
        assert res["errors"] == 0 and res["complete"] == 3


def test_run_end_to_end_tiny(tmp_path: Path) -> None:
    """The ReAct graph on every SQLite saver, sync and async (``ainvoke`` on the async savers)."""
    import run

    chosen = [s for s in run.savers(str(tmp_path), postgres=False) if s.name in ("official SqliteSaver", "threadline SqliteSaver")]
    for durability in run.DURABILITY:
        found = run.measure_e2e(chosen, threads=1, turns=2, durability=durability)
        assert len(found) == 2 and all(secs > 0 for secs, _ in found)
        assert all((size is None) == (durability == "ainvoke") for _, size in found)


def test_chat_fleet_tiny(tmp_path: Path) -> None:
    """Every saver pair of the chat fleet, sync and async (in this process, for speed): the
    report has every figure, and they are positive; one run through its own processes."""
    import chat_fleet

    args = argparse.Namespace(threads=2, async_threads=2, concurrency=2, pairs=1)
    postgres = postgres_unavailable() is None
    results = chat_fleet.run(args, postgres=postgres, child=chat_fleet.in_process)
    assert len(results) == 2 * 2 * (2 if postgres else 1)
    for r in results:
        (run,) = r["runs"]
        for key in ("cpu_ms", "wall_ms", "get_p50_ms", "first_get_ms", "open_ms", "bytes", "rss_mb"):
            assert run[key] > 0, (r["spec"]["name"], key)
        if r["spec"]["backend"] == "sqlite":
            assert run["statements"]["INSERT"] > 0 and run["statements"]["SELECT"] > 0
    md = chat_fleet.render(results, args, header="- machine")
    for label, _, _ in chat_fleet.ROWS:
        assert f"| {label} |" in md or (label.startswith("Postgres") and not postgres)
    assert "threadline AsyncSqliteSaver" in md

    spec = next(r["spec"] for r in results if r["spec"]["name"] == "threadline SqliteSaver")
    run = chat_fleet.one_run(spec, str(tmp_path), 0)  # the worker and the reader in processes of their own
    assert run["cpu_ms"] > 0 and run["get_p50_ms"] > 0 and run["rss_mb"] > 0 and run["statements"]["INSERT"] > 0


def test_per_call_tiny(capsys: pytest.CaptureFixture[str]) -> None:
    """The per-call benchmark at a tiny size, SQLite only: every row of its table is printed."""
    import per_call

    md = per_call.main(["--threads", "2", "--rounds", "1", "--cold", "1", "--long-turns", "2", "--points", "2",
                        "--forks", "1", "--no-postgres"])
    assert md in capsys.readouterr().out
    for label in per_call.KINDS.values():
        assert f"| {label}" in md, label
    assert "| bytes on disk after the 2 threads |" in md
    assert "### SqliteSaver" in md and "### PostgresSaver" not in md


def test_lg_graphs_quick(capsys: pytest.CaptureFixture[str]) -> None:
    """LangGraph's benchmark graphs, small (``--quick``): a row per graph and backend in the
    summary and in each backend's table; the run itself checks what every saver reads back."""
    import lg_graphs

    postgres = postgres_unavailable() is None
    md = lg_graphs.main(["--quick", "--postgres" if postgres else "--no-postgres"])
    assert md in capsys.readouterr().out
    backends = ["SqliteSaver", "PostgresSaver"] if postgres else ["SqliteSaver"]
    assert md.count("### ") == len(backends) + 1 and "### Bytes by table and index" in md
    assert ("| Postgres client CPU |" in md) == postgres
    for graph in lg_graphs.graphs(quick=True):
        assert sum(line.startswith(f"| {graph.label} | ") for line in md.splitlines()) == 1 + sum(
            5 if b == "SqliteSaver" else 7 for b in backends), graph.label
        for backend in backends:
            for saver in ("official", "threadline"):
                assert f"- {graph.label}, {saver} {backend} (" in md


def test_scalar_state_tiny() -> None:
    """The scalar-state graph, tiny: every saver reads each thread back (the run checks it), and
    threadline keeps its scalars in the document — blob rows only for the list, as the official
    PostgresSaver's."""
    import scalar_state

    postgres = postgres_unavailable() is None
    args = argparse.Namespace(threads=2, steps=4, pairs=1, no_postgres=not postgres)
    results = scalar_state.measure(args)
    assert [r[0] for r in results] == (["SQLite", "Postgres"] if postgres else ["SQLite"])
    rows = {name: (official[1], ours[1]) for name, official, ours in results}
    # a thread's rows: its input (``__start__``) and its log list at each of its steps + 1 versions
    assert rows["SQLite"][1] == 2 * (1 + 4 + 1)
    if postgres:
        assert rows["Postgres"] == (rows["SQLite"][1], rows["SQLite"][1])
    assert scalar_state.render(results, args).count("\n| ") == len(results) + 1
