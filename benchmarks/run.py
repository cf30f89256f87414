"""threadline vs the official LangGraph savers, side by side, in one run: ``make bench``.

Usage::

    .venv/bin/python benchmarks/run.py [--threads 3] [--steps 300] [--turns 30]
                                       [--no-postgres] [--profile] [--write-results]

Workload 1 (agent loop): a real LangGraph graph, 3 threads × 300 supersteps, each
superstep appending 2 messages of ~300 bytes of text (an AI message with a tool
call and the tool's answer) to the ``messages`` channel. Its saver calls are
recorded once and replayed, identically, on every saver (``workload.py``).
Per saver it prints:

* put / put_writes / put+put_writes ms per superstep at 100 and at 300 steps of
  history (median over the 10 supersteps up to that step, all threads), and the CPU
  time of put+put_writes: this process's thread plus, for Postgres, the server backend
  serving the saver's connection (``/proc/<pid>/schedstat``; a local server), which
  load from other processes moves far less than wall time;
* get-latest ms (``get_tuple`` of each thread's latest checkpoint, median), by the saver
  that wrote it and with nothing cached, and the same for one thread of ``--long``
  messages (its last 64 supersteps replayed, ``workload.record_long_thread``);
* list ms per checkpoint (``list`` of one whole thread);
* bytes on disk (SQLite: the file after a WAL checkpoint; Postgres: the total
  relation size, indexes and TOAST included, of the saver's tables);
* amplification = bytes on disk ÷ (final state bytes + write bytes), both as
  LangGraph's serializer writes them;
* each figure's ratio to the official saver on the same backend (< 1: smaller
  or faster).

Workload 2 (end to end): a ReAct-style graph (agent → tools → agent) with a fake
chat model, ``--turns`` turns per thread, with LangGraph's ``durability="sync"`` and
``"async"`` (the default: the checkpoint written while the next step runs): wall time
and bytes on disk (async run).

Savers: ``InMemorySaver`` (a floor: no I/O), the official ``SqliteSaver`` and
``PostgresSaver`` (``langgraph-checkpoint-sqlite`` / ``-postgres``), threadline's
``SqliteSaver`` and ``PostgresSaver`` with their defaults, and threadline without
zstd (what delta encoding alone gives); both Postgres savers prepare their statements on
the server (``prepare_threshold=0``, ``from_conn_string``'s default for both). Each
Postgres saver gets its own schema (``options=-csearch_path=…``). The Postgres DSN comes
from ``THREADLINE_BENCH_POSTGRES`` (default ``postgresql://postgres@127.0.0.1:5432/test``);
without a server the Postgres rows are skipped. ``--write-results`` rewrites the
generated part of ``benchmarks/RESULTS.md`` (``run_report.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import cProfile
import gc
import io
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

import workload as W  # noqa: E402
from run_report import DURABILITY, LONG, PG_DSN, RESULTS, fmt_bytes, machine, ratio, tables, targets, write_results  # noqa: E402, F401
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer  # noqa: E402

from threadline.codec import BlobCodec  # noqa: E402

GET_ROUNDS = 15  # get-latest calls per thread and saver (alternating savers); the median is reported


# --- savers ------------------------------------------------------------------------------------------


@dataclass
class Saver:
    backend: str  # "memory" | "sqlite" | "postgres"
    name: str
    official: bool
    open: Callable[..., Any]  # open(fresh=True): a context manager yielding (saver, bytes_on_disk())
    aopen: Callable[..., Any] | None = None  # aopen(): an async context manager yielding the async saver on a fresh database

    def open_again(self) -> Any:
        """The same database again (not emptied)."""
        return self.open(fresh=False)


def _with_schema(dsn: str, schema: str) -> str:
    sep = "&" if "?" in dsn else "?"
    return f"{dsn}{sep}options={quote(f'-csearch_path={schema}', safe='')}"


_CREATED: set[str] = set()


def _own(schema: str) -> str:
    """This run's name for ``schema``: runs sharing the server never drop each other's tables."""
    return f"{schema}_{os.getpid()}"


def _fresh_schema(schema: str) -> str:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        conn.execute(f'CREATE SCHEMA "{schema}"')
    if not _CREATED:
        atexit.register(_drop_created)
    _CREATED.add(schema)
    return _with_schema(PG_DSN, schema)


def _drop_created() -> None:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        for schema in _CREATED:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _pg_bytes(schema: str) -> int:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        row = conn.execute(
            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
            (schema,),
        ).fetchone()
    return int(row[0])


def _remove(path: str) -> None:
    for p in (path, path + "-wal", path + "-shm"):
        if os.path.exists(p):
            os.remove(p)


def _sqlite_bytes(conn: Any, path: str) -> int:
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def _memory_bytes(saver: InMemorySaver) -> int:
    total = 0
    for per_ns in saver.storage.values():
        for per_id in per_ns.values():
            for ck in per_id.values():
                total += sum(len(x[1]) for x in ck if isinstance(x, tuple) and len(x) == 2 and isinstance(x[1], bytes))
    total += sum(len(v[1]) for v in saver.blobs.values() if isinstance(v, tuple) and isinstance(v[1], bytes))
    for writes in saver.writes.values():
        total += sum(len(w[2][1]) for w in writes.values())
    return total


@contextmanager
def memory_saver(fresh: bool = True) -> Iterator[tuple[Any, Callable[[], int]]]:
    saver = InMemorySaver()
    yield saver, lambda: _memory_bytes(saver)


def official_sqlite(tmp: str) -> Callable:
    @contextmanager
    def open_(fresh: bool = True) -> Iterator[tuple[Any, Callable[[], int]]]:
        from langgraph.checkpoint.sqlite import SqliteSaver

        path = os.path.join(tmp, "official.db")
        if fresh:
            _remove(path)
        with SqliteSaver.from_conn_string(path) as saver:
            saver.setup()
            yield saver, lambda: _sqlite_bytes(saver.conn, path)

    return open_


def threadline_sqlite(tmp: str, name: str, **codec: Any) -> Callable:
    @contextmanager
    def open_(fresh: bool = True) -> Iterator[tuple[Any, Callable[[], int]]]:
        from threadline import SqliteSaver

        path = os.path.join(tmp, f"threadline-{name}.db")
        if fresh:
            _remove(path)
        with SqliteSaver.from_conn_string(path) as saver:
            if codec:
                saver.blob_codec = BlobCodec(**codec)
            yield saver, lambda: _sqlite_bytes(saver.conn, path)

    return open_


def official_postgres(schema: str) -> Callable:
    schema = _own(schema)
    @contextmanager
    def open_(fresh: bool = True) -> Iterator[tuple[Any, Callable[[], int]]]:
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(_fresh_schema(schema) if fresh else _with_schema(PG_DSN, schema)) as saver:
            saver.setup()
            yield saver, lambda: _pg_bytes(schema)

    return open_


def threadline_postgres(schema: str, **codec: Any) -> Callable:
    schema = _own(schema)
    @contextmanager
    def open_(fresh: bool = True) -> Iterator[tuple[Any, Callable[[], int]]]:
        from threadline import PostgresSaver

        url = _fresh_schema(schema) if fresh else _with_schema(PG_DSN, schema)
        with PostgresSaver.from_conn_string(url) as saver:
            if codec:
                saver.blob_codec = BlobCodec(**codec)
            yield saver, lambda: _pg_bytes(schema)

    return open_


def async_saver(backend: str, official: bool, where: str) -> Callable:
    """``Saver.aopen`` of the async saver class (official or threadline) on a fresh database:
    ``where`` is the SQLite file or the Postgres schema."""

    @asynccontextmanager
    async def aopen() -> Any:
        if backend == "sqlite":
            _remove(where)
            if official:
                from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver as cls
            else:
                from threadline import AsyncSqliteSaver as cls
            target = where
        else:
            if official:
                from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver as cls
            else:
                from threadline import AsyncPostgresSaver as cls
            target = _fresh_schema(_own(where))
        async with cls.from_conn_string(target) as saver:
            await saver.setup()
            yield saver

    return aopen


def postgres_reason() -> str | None:
    try:
        import psycopg

        import threadline

        threadline.PostgresSaver  # noqa: B018
        with psycopg.connect(PG_DSN, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:  # no server, or no threadline.PostgresSaver yet
        return f"{type(exc).__name__}: {exc}"
    return None


def savers(tmp: str, postgres: bool) -> list[Saver]:
    out = [
        Saver("memory", "InMemorySaver (floor)", False, memory_saver),
        Saver("sqlite", "official SqliteSaver", True, official_sqlite(tmp), async_saver("sqlite", True, os.path.join(tmp, "official-aio.db"))),
        Saver("sqlite", "threadline SqliteSaver", False, threadline_sqlite(tmp, "default"), async_saver("sqlite", False, os.path.join(tmp, "threadline-aio.db"))),
        Saver("sqlite", "threadline, no zstd", False, threadline_sqlite(tmp, "nozstd", compress_min_bytes=-1)),
        Saver("sqlite", "threadline, no deltas", False, threadline_sqlite(tmp, "nodelta", max_depth=0)),
    ]
    if postgres:
        out += [
            Saver("postgres", "official PostgresSaver", True, official_postgres("bench_official"), async_saver("postgres", True, "bench_official_aio")),
            Saver("postgres", "threadline PostgresSaver", False, threadline_postgres("bench_threadline"), async_saver("postgres", False, "bench_threadline_aio")),
            Saver("postgres", "threadline, no zstd", False, threadline_postgres("bench_threadline_nozstd", compress_min_bytes=-1)),
        ]
    return out


# --- measuring ----------------------------------------------------------------------------------------


@dataclass
class Figures:
    saver: Saver
    put: dict[int, float] = field(default_factory=dict)  # at step → median ms
    writes: dict[int, float] = field(default_factory=dict)
    both: dict[int, float] = field(default_factory=dict)
    cpu: dict[int, float] = field(default_factory=dict)  # put+put_writes CPU ms (client + Postgres backend)
    get_latest: float = 0.0
    get_latest_cold: float = 0.0
    get_latest_min: float = 0.0
    get_latest_cold_min: float = 0.0
    long_get: float | None = None  # get-latest ms of the --long thread, the saver that wrote / nothing cached
    long_get_cold: float | None = None
    list_per_ck: float = 0.0
    bytes: int = 0
    amplification: float = 0.0
    e2e_seconds: dict[str, float] = field(default_factory=dict)  # durability → wall seconds
    e2e_bytes: int | None = None
    e2e_long_ms: float | None = None  # one long conversation: CPU ms per turn over its last LONG_TAIL turns


def window(t: W.Timings, at: int, size: int = 10) -> tuple[float, float, float, float]:
    keys = [k for k in t.put if at - size < k[1] <= at]
    put = [t.put[k] for k in keys]
    writes = [t.writes.get(k, 0.0) for k in keys]
    cpu = statistics.median(t.cpu.get(k, 0.0) for k in keys)
    return statistics.median(put), statistics.median(writes), statistics.median(p + w for p, w in zip(put, writes)), cpu


def server_cpu(saver: Any) -> Callable[[], float]:
    """ms of CPU the Postgres backend process serving ``saver``'s connection has used so far
    (Linux ``/proc/<pid>/schedstat``, a server on this machine); 0 for in-process savers."""
    info = getattr(getattr(saver, "conn", None), "info", None)
    pid = getattr(info, "backend_pid", None)
    path = f"/proc/{pid}/schedstat"
    if pid is None or not os.path.exists(path):
        return lambda: 0.0

    def read() -> float:
        with open(path) as f:
            return int(f.read().split()[0]) / 1e6

    return read


def replay_all(opened: list[tuple[Saver, Any]], rec: W.Recording) -> list[W.Timings]:
    """Replay the recording on every saver at once, call by call (the saver order rotating),
    so that load from other processes on the machine hits every saver alike. Besides wall
    time, each call's CPU time is summed: this thread's and the Postgres backend's, which
    other processes' load does not inflate as it does wall time."""
    timings = [W.Timings() for _ in opened]
    clock = time.perf_counter
    servers = [server_cpu(saver) for _, saver in opened]
    for i, (tid, call) in enumerate(W.interleaved(rec)):
        order = list(range(len(opened)))
        order = order[i % len(order):] + order[: i % len(order)]
        for j in order:
            saver, t = opened[j][1], timings[j]
            key = (tid, call.step)
            cpu0 = time.thread_time() * 1000 + servers[j]()
            start = clock()
            if call.kind == "put":
                t.last_config[tid] = saver.put(*call.args)
                t.put[key] = t.put.get(key, 0.0) + (clock() - start) * 1000
            else:
                saver.put_writes(*call.args)
                t.writes[key] = t.writes.get(key, 0.0) + (clock() - start) * 1000
            t.cpu[key] = t.cpu.get(key, 0.0) + time.thread_time() * 1000 + servers[j]() - cpu0
    return timings


def alternating(turns: int, savers: int) -> Iterator[tuple[int, int]]:
    """(turn, saver index) for every turn on every saver, the savers' order reversed every other
    turn, so that no saver always runs first (warm caches) or last (a drifting machine)."""
    for turn in range(turns):
        for j in range(savers) if turn % 2 == 0 else reversed(range(savers)):
            yield turn, j


def round_robin(opened: list[tuple[Saver, Any]], fn: Callable[[Any], Any], rounds: int) -> list[list[float]]:
    """Time ``fn(saver)`` ``rounds`` times per saver, alternating between savers; ms per call."""
    out: list[list[float]] = [[] for _ in opened]
    for _, j in alternating(rounds, len(opened)):
        start = time.perf_counter()
        fn(opened[j][1])
        out[j].append((time.perf_counter() - start) * 1000)
    return out


def measure(
    chosen: list[Saver], rec: W.Recording, denominator: int, at: list[int], profile: bool, long: W.Recording | None = None
) -> list[Figures]:
    figs = [Figures(s) for s in chosen]
    with ExitStack() as stack:
        opened = [(s, *stack.enter_context(s.open())) for s in chosen]
        savers_only = [(s, saver) for s, saver, _ in opened]
        gc.collect()
        prof = cProfile.Profile() if profile else None
        if prof:
            prof.enable()
        timings = replay_all(savers_only, rec)
        if prof:
            prof.disable()
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(30)
            print(f"\n--- cProfile of the replay (all savers) ---\n{out.getvalue()}")
        for f, t in zip(figs, timings):
            for step in at:
                f.put[step], f.writes[step], f.both[step], f.cpu[step] = window(t, step)
        for tid in rec.threads:
            want = len(rec.final_values[tid]["messages"])
            conf = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
            for (s, saver) in savers_only:
                got = saver.get_tuple(conf)
                assert got is not None and len(got.checkpoint["channel_values"]["messages"]) == want, s.name
        gets: list[list[float]] = [[] for _ in chosen]
        colds: list[list[float]] = [[] for _ in chosen]

        def cold_get(saver: Any, conf: dict) -> Any:
            cache = getattr(getattr(saver, "blob_codec", None), "cache", None)
            if cache is not None:
                cache.clear()  # as a new process would: every value read from the database
            return saver.get_tuple(conf)

        for tid in rec.threads:
            conf = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
            for j, ms in enumerate(round_robin(savers_only, lambda saver: saver.get_tuple(conf), GET_ROUNDS)):
                gets[j] += ms
            for j, ms in enumerate(round_robin(savers_only, lambda saver: cold_get(saver, conf), GET_ROUNDS)):
                colds[j] += ms
        for j, f in enumerate(figs):  # the workload's bytes, before the long thread adds its own
            f.bytes = opened[j][2]()
            f.amplification = f.bytes / denominator
        if long is not None:
            for _, saver in savers_only:
                for _, call in W.interleaved(long):
                    (saver.put if call.kind == "put" else saver.put_writes)(*call.args)
            conf = {"configurable": {"thread_id": "long-0", "checkpoint_ns": ""}}
            warm = round_robin(savers_only, lambda saver: saver.get_tuple(conf), GET_ROUNDS)
            cold = round_robin(savers_only, lambda saver: cold_get(saver, conf), GET_ROUNDS)
            for j, f in enumerate(figs):
                f.long_get, f.long_get_cold = statistics.median(warm[j]), statistics.median(cold[j])
        tid = next(iter(rec.threads))
        conf = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
        counts = [sum(1 for _ in saver.list(conf)) for _, saver in savers_only]
        lists = round_robin(savers_only, lambda saver: sum(1 for _ in saver.list(conf)), 2)
        for j, f in enumerate(figs):
            f.get_latest, f.get_latest_min = statistics.median(gets[j]), min(gets[j])
            f.get_latest_cold, f.get_latest_cold_min = statistics.median(colds[j]), min(colds[j])
            f.list_per_ck = min(lists[j]) / max(counts[j], 1)
    return figs


REACT_0 = {"configurable": {"thread_id": "react-0"}}


def measure_e2e(chosen: list[Saver], threads: int, turns: int, durability: str) -> list[tuple[float, int | None]]:
    """The ReAct graph on every saver with LangGraph's ``durability`` ("sync": each checkpoint
    written before the next step; "async": while it runs; "ainvoke": the async savers under
    ``ainvoke``), turn by turn alternating savers: wall seconds and bytes on disk (None for "ainvoke")."""
    if durability == "ainvoke":
        return [(secs, None) for secs in asyncio.run(_measure_ainvoke(chosen, threads, turns))]
    with ExitStack() as stack:
        opened = [(s, *stack.enter_context(s.open())) for s in chosen]
        graphs = [[W.react_graph(seed=t).compile(checkpointer=saver) for t in range(threads)] for _, saver, _ in opened]
        seconds = [0.0] * len(opened)
        gc.collect()
        for turn, j in alternating(turns, len(opened)):
            start = time.perf_counter()
            for t, graph in enumerate(graphs[j]):
                graph.invoke(W.user_turn(t, turn), {"configurable": {"thread_id": f"react-{t}"}}, durability=durability)
            seconds[j] += time.perf_counter() - start
        for j, gs in enumerate(graphs):
            assert len(gs[0].get_state(REACT_0).values["messages"]) == 4 * turns, opened[j][0].name
        return [(seconds[j], opened[j][2]()) for j in range(len(opened))]


LONG_TAIL = 20  # the last turns of the long conversation whose CPU per turn is reported


def measure_e2e_long(chosen: list[Saver], turns: int) -> list[float]:
    """One ReAct conversation of ``turns`` turns on every saver (durability "sync"), turn by
    turn alternating savers: CPU ms (this process; the Postgres server's is not counted) per
    turn over the last ``LONG_TAIL`` turns, where the history is longest."""
    with ExitStack() as stack:
        opened = [stack.enter_context(s.open())[0] for s in chosen]
        graphs = [W.react_graph(seed=0).compile(checkpointer=saver) for saver in opened]
        tail = [0.0] * len(opened)
        gc.collect()
        for turn, j in alternating(turns, len(opened)):
            start = time.process_time()
            graphs[j].invoke(W.user_turn(0, turn), {"configurable": {"thread_id": "long-react"}}, durability="sync")
            if turn >= turns - LONG_TAIL:
                tail[j] += (time.process_time() - start) * 1000
        return [t / min(LONG_TAIL, turns) for t in tail]


async def _measure_ainvoke(chosen: list[Saver], threads: int, turns: int) -> list[float]:
    """``measure_e2e`` of the async savers (``Saver.aopen``) under ``ainvoke``."""
    async with AsyncExitStack() as stack:
        opened = [await stack.enter_async_context(s.aopen()) for s in chosen]
        graphs = [[W.react_graph(seed=t).compile(checkpointer=saver) for t in range(threads)] for saver in opened]
        seconds = [0.0] * len(opened)
        gc.collect()
        for turn, j in alternating(turns, len(opened)):
            start = time.perf_counter()
            for t, graph in enumerate(graphs[j]):
                await graph.ainvoke(W.user_turn(t, turn), {"configurable": {"thread_id": f"react-{t}"}})
            seconds[j] += time.perf_counter() - start
        for j, gs in enumerate(graphs):
            assert len((await gs[0].aget_state(REACT_0)).values["messages"]) == 4 * turns, chosen[j].name
        return seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=3)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--turns", type=int, default=30, help="end-to-end ReAct turns per thread (0: skip)")
    ap.add_argument("--long-turns", type=int, default=150, help="turns of the one long end-to-end conversation (0: skip)")
    ap.add_argument("--long", type=int, default=LONG, help="messages of the long thread read by get-latest (0: skip)")
    ap.add_argument("--no-postgres", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated substrings of saver names to run")
    ap.add_argument("--profile", action="store_true", help="cProfile the threadline replays")
    ap.add_argument("--write-results", action="store_true", help=f"rewrite the generated part of {RESULTS.name}")
    args = ap.parse_args(argv)

    reason = None if args.no_postgres else postgres_reason()
    use_pg = not args.no_postgres and reason is None
    if not args.no_postgres and reason:
        print(f"Postgres rows skipped: {reason}")
    at = sorted({min(100, args.steps), args.steps})

    t0 = time.perf_counter()
    rec = W.record_agent_loop(args.threads, args.steps)
    serde = JsonPlusSerializer()
    state_bytes = sum(len(serde.dumps_typed(v)[1]) for values in rec.final_values.values() for v in values.values())
    write_bytes = sum(len(serde.dumps_typed(v)[1]) for v in rec.write_values)
    msgs = rec.final_values[next(iter(rec.final_values))]["messages"]
    msg_bytes = statistics.mean(len(serde.dumps_typed(m)[1]) for m in msgs[1:])
    print(
        f"recorded {args.threads} threads × {args.steps} supersteps in {time.perf_counter() - t0:.1f} s: "
        f"final state {fmt_bytes(state_bytes)}, writes {fmt_bytes(write_bytes)}, "
        f"{len(msgs)} messages/thread, {msg_bytes:.0f} bytes/message serialized"
    )
    denominator = state_bytes + write_bytes
    long = W.record_long_thread(args.long) if args.long else None
    gc.freeze()  # the recording stays alive: keep it out of every collection during the timings
    with tempfile.TemporaryDirectory(prefix="threadline-bench-") as tmp:
        chosen = [s for s in savers(tmp, use_pg) if not args.only or any(o and o in s.name for o in args.only.split(","))]
        start = time.perf_counter()
        figs = measure(chosen, rec, denominator, at, args.profile, long)
        print(f"agent loop on {len(chosen)} savers: {time.perf_counter() - start:.1f} s")
        if args.turns:
            e2e = [s for s in savers(tmp + "/e2e", use_pg)
                   if "no " not in s.name and (not args.only or any(o and o in s.name for o in args.only.split(",")))]
            os.makedirs(tmp + "/e2e", exist_ok=True)
            start = time.perf_counter()
            for durability in DURABILITY:
                runs = [s for s in e2e if durability != "ainvoke" or s.aopen is not None]
                for s, (secs, size) in zip(runs, measure_e2e(runs, args.threads, args.turns, durability)):
                    for f in figs:
                        if f.saver.name == s.name and f.saver.backend == s.backend:
                            f.e2e_seconds[durability] = secs
                            f.e2e_bytes = size if size is not None else f.e2e_bytes
            print(f"end to end on {len(e2e)} savers: {time.perf_counter() - start:.1f} s")
        if args.long_turns:
            e2e = [s for s in savers(tmp + "/e2e-long", use_pg)
                   if "no " not in s.name and s.backend != "memory" and (not args.only or any(o and o in s.name for o in args.only.split(",")))]
            os.makedirs(tmp + "/e2e-long", exist_ok=True)
            for s, ms in zip(e2e, measure_e2e_long(e2e, args.long_turns)):
                for f in figs:
                    if f.saver.name == s.name and f.saver.backend == s.backend:
                        f.e2e_long_ms = ms
    report = (
        f"## Run\n\n{machine()}\n\n"
        f"Workload: {args.threads} threads × {args.steps} supersteps, 2 messages of 300 bytes of text per superstep "
        f"({msg_bytes:.0f} bytes each serialized); final state {fmt_bytes(state_bytes)}, writes {fmt_bytes(write_bytes)} "
        f"(amplification denominator {fmt_bytes(denominator)}); a long thread of {args.long} messages for get-latest. "
        f"End to end: ReAct graph, {args.threads} threads × {args.turns} turns (4 messages and 3 supersteps per turn), "
        f"durability sync and async on the sync savers (`invoke`), and the async savers under `ainvoke`; "
        f"and one conversation of {args.long_turns} turns ({4 * args.long_turns} messages at the end), durability sync.\n\n"
        f"{tables(figs, at, args.threads, args.turns, args.long, args.long_turns)}\n## Targets\n\n{targets(figs, at[-1], args.long)}\n"
    )
    print()
    print(report)
    if args.write_results:
        write_results(report)
        print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
