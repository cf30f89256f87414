"""Chat fleet (issue 28): many short conversations of a real prebuilt agent, threadline vs the
official savers, side by side in one run.

Usage::

    .venv/bin/python benchmarks/chat_fleet.py [--threads 200] [--async-threads 96] [--concurrency 16]
        [--pairs 5] [--no-postgres] [--profile DIR] [--write-results]

Workload: ``langgraph.prebuilt.create_react_agent`` with a fake chat model (``FleetModel``:
a user message gets a tool call, the tool's answer gets a final reply) and two tools; a turn
is one ``invoke`` with a user message (~300 bytes) and writes a tool call, a tool answer
(~500–800 bytes) and a reply (~600 bytes): 4 messages and 4 checkpoints. LangGraph's default
durability. The fleet:

* **sync**: ``--threads`` threads × 4 turns, one after the other (``invoke``), on
  ``SqliteSaver`` and ``PostgresSaver``;
* **async**: ``--async-threads`` threads × 4 turns, ``--concurrency`` conversations at once
  (``ainvoke`` under ``asyncio.gather``), on ``AsyncSqliteSaver`` and ``AsyncPostgresSaver``.

Each saver, official and threadline, runs on a fresh database (a SQLite file in a temporary
directory; a Postgres database created for the run, at ``THREADLINE_TEST_POSTGRES``, default
``postgresql://postgres@127.0.0.1:5432/test``) in a fresh process (``--child``), so imports
and caches do not leak between savers. ``--pairs`` pairs, official then threadline, all
groups interleaved; the table gives the median over the pairs. Per run:

* client CPU per turn (``time.process_time`` of the worker during the fleet: LangGraph, the
  saver and its driver) and wall per turn; on Postgres also the CPU of the server backend
  serving the saver's connection (``/proc/<pid>/schedstat``, a server on this machine);
* peak RSS of the worker (``ru_maxrss``);
* SQL statements per turn (SQLite: ``set_trace_callback`` counting SELECT / INSERT / UPDATE /
  DELETE, over 5 more threads × 4 turns on a second fresh file after the timed fleet, so that
  tracing costs the timing nothing; not counted on Postgres);
* storage after the fleet: the SQLite file (with its WAL, if any is left after the worker
  closed) or the growth of ``pg_database_size`` since the database was created;
* then, in another NEW process on the same database: the first open (``from_conn_string``
  entered + ``setup()``, the same user code for both savers) and ``get_tuple`` (``aget_tuple``)
  of the latest checkpoint of 25 of the fleet's threads (16 messages each), one call each:
  their p50, and the very first call alone.

``--profile DIR``: after the table, one more run of threadline's (and, to compare, the
official) sync SQLite fleet under ``cProfile``, every thread profiled in its own CPU time
(LangGraph writes checkpoints from a background thread): ``DIR/chat_fleet-<saver>.prof`` and
``.txt`` (top 40 by tottime and by cumulative time). When ``py-spy`` is installed (``pip
install py-spy``), one more run each under ``py-spy record`` (sampling, the whole worker
process): ``.py-spy.raw`` (collapsed stacks, for flame graph tools) and ``.py-spy.txt`` (top 40
functions by self and by inclusive samples).
``--write-results`` rewrites the ``<!-- chat-fleet:start -->`` section of ``RESULTS.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import gc
import io
import json
import os
import pstats
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
import zlib
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

from run_report import PG_DSN as BENCH_DSN, fmt_bytes, machine, write_results  # noqa: E402

PG_DSN = os.environ.get("THREADLINE_TEST_POSTGRES") or BENCH_DSN
START, END = "<!-- chat-fleet:start -->", "<!-- chat-fleet:end -->"
TURNS = 4  # turns per conversation
GETS = 25  # threads read back by the cold reader
COUNT_THREADS = 5  # threads × TURNS of the statement-counting pass
NAMES = {("sqlite", False): "SqliteSaver", ("postgres", False): "PostgresSaver",
         ("sqlite", True): "AsyncSqliteSaver", ("postgres", True): "AsyncPostgresSaver"}


# --- the workload: a prebuilt ReAct agent, a fake model, two tools -----------------------------------------


@functools.cache
def _text(seed: str, n_bytes: int) -> str:
    """~``n_bytes`` of pseudo-English (``workload.text``), the same for the same seed; ``prepare``
    makes every text of a fleet before it is timed, so the fake model costs a dict look-up."""
    import workload as W

    return W.text(random.Random(zlib.crc32(seed.encode())), n_bytes)


def _tools() -> list:
    from langchain_core.tools import tool

    @tool
    def search_docs(query: str) -> str:
        """Search the product documentation."""
        return _text("docs " + query, 800)

    @tool
    def order_status(order_id: str) -> str:
        """Look up an order by its id."""
        return json.dumps({"order_id": order_id, "status": "shipped", "carrier": "UPS", "notes": _text(order_id, 420)})

    return [search_docs, order_status]


def _tool_call(t: int, turn: int) -> dict:
    """The tool call of thread ``t``'s turn: the two tools in turn."""
    if turn % 2 == 0:
        return {"name": "search_docs", "args": {"query": _text(f"query {t} {turn}", 60)}}
    return {"name": "order_status", "args": {"order_id": f"A-{t:05d}-{turn}"}}


def _model() -> Any:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class FleetModel(BaseChatModel):
        """A user message gets a tool call, a tool's answer the final reply (the turn is read
        from the user message's id)."""

        @property
        def _llm_type(self) -> str:
            return "fake-fleet"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
            user = next(m for m in reversed(messages) if isinstance(m, HumanMessage))
            _, t, turn = user.id.split("-")
            if messages[-1] is user:
                msg = AIMessage(content="", tool_calls=[{**_tool_call(int(t), int(turn)), "id": f"call-{t}-{turn}", "type": "tool_call"}])
            else:
                msg = AIMessage(content=_text(f"reply {t} {turn}", 600))
            return ChatResult(generations=[ChatGeneration(message=msg)])

    return FleetModel()


def prepare(threads: int) -> None:
    """Every text of ``threads`` conversations, made now rather than while they are timed."""
    tools = {f.name: f for f in _tools()}
    for t in range(threads):
        for turn in range(TURNS):
            user_message(t, turn)
            _text(f"reply {t} {turn}", 600)
            call = _tool_call(t, turn)
            tools[call["name"]].func(**call["args"])


def agent(checkpointer: Any) -> Any:
    from langgraph.prebuilt import create_react_agent

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated for langchain.agents; still LangGraph's prebuilt
        return create_react_agent(_model(), _tools(), checkpointer=checkpointer)


def user_message(thread: int, turn: int) -> dict:
    return {"messages": [{"role": "user", "content": _text(f"user {thread} {turn}", 300), "id": f"user-{thread}-{turn}"}]}


def config(thread: int) -> dict:
    return {"configurable": {"thread_id": f"chat-{thread}"}}


# --- savers and databases ---------------------------------------------------------------------------------


def saver_class(backend: str, official: bool, is_async: bool) -> Any:
    if official:
        if backend == "sqlite":
            from langgraph.checkpoint.sqlite import SqliteSaver
            from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
        else:
            from langgraph.checkpoint.postgres import PostgresSaver as SqliteSaver  # noqa: N814
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver as AsyncSqliteSaver  # noqa: N814
        return AsyncSqliteSaver if is_async else SqliteSaver
    import threadline

    return getattr(threadline, ("Async" if is_async else "") + ("SqliteSaver" if backend == "sqlite" else "PostgresSaver"))


@contextmanager
def opened(spec: dict, where: str | None = None) -> Any:
    """The sync saver of ``spec`` on ``where`` (default: the run's database), set up."""
    with saver_class(spec["backend"], spec["official"], False).from_conn_string(where or spec["where"]) as saver:
        saver.setup()
        yield saver


@asynccontextmanager
async def aopened(spec: dict, where: str | None = None) -> Any:
    async with saver_class(spec["backend"], spec["official"], True).from_conn_string(where or spec["where"]) as saver:
        await saver.setup()
        yield saver


def _admin(sql: str) -> Any:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True, connect_timeout=5) as conn:
        return conn.execute(sql).fetchone() if sql.startswith("SELECT") else conn.execute(sql)


def _db_url(name: str) -> str:
    parts = urlsplit(PG_DSN)
    if parts.scheme.startswith("postgres"):
        return urlunsplit(parts._replace(path="/" + name))
    from psycopg.conninfo import make_conninfo

    return make_conninfo(PG_DSN, dbname=name)


def _db_size(name: str) -> int:
    return int(_admin(f"SELECT pg_database_size('{name}')")[0])


def postgres_reason() -> str | None:
    try:
        _admin("SELECT 1")
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


# --- the worker processes ---------------------------------------------------------------------------------


_KINDS = ("SELECT", "INSERT", "UPDATE", "DELETE")


def _counter() -> tuple[dict[str, int], Any]:
    counts = dict.fromkeys(_KINDS, 0)

    def trace(sql: str) -> None:
        words = re.findall(r"[A-Za-z]+", sql[:4000].upper())
        first = words[0] if words else ""
        if first == "WITH":  # a CTE: the statement is its first data-changing verb, else a SELECT
            first = next((w for w in words if w in ("INSERT", "UPDATE", "DELETE")), "SELECT")
        if first in counts:
            counts[first] += 1

    return counts, trace


def _sync_fleet(graph: Any, threads: int, first: int = 0) -> None:
    for t in range(first, first + threads):
        for turn in range(TURNS):
            graph.invoke(user_message(t, turn), config(t))


async def _async_fleet(graph: Any, threads: int, concurrency: int, first: int = 0) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def conversation(t: int) -> None:
        async with gate:
            for turn in range(TURNS):
                await graph.ainvoke(user_message(t, turn), config(t))

    await asyncio.gather(*(conversation(t) for t in range(first, first + threads)))


def _check(values: dict, name: str) -> None:
    if len(values["messages"]) != 4 * TURNS:
        raise SystemExit(f"{name}: a thread read back {len(values['messages'])} messages, not {4 * TURNS}")


def _server_cpu_ms(saver: Any) -> Any:
    """ms of CPU used so far by the Postgres backend serving ``saver``'s connection (a server on
    this machine: ``/proc/<pid>/schedstat``), or None (SQLite, a pool, a remote server)."""
    pid = getattr(getattr(getattr(saver, "conn", None), "info", None), "backend_pid", None)
    path = Path(f"/proc/{pid}/schedstat")
    return (lambda: int(path.read_text().split()[0]) / 1e6) if pid and path.exists() else None


@contextmanager
def measuring(saver: Any, turns: int, prof: AllThreads | None) -> Any:
    """Client CPU, wall and (Postgres) server CPU per turn of the block, into the dict yielded."""
    out: dict[str, float] = {}
    server = _server_cpu_ms(saver)
    gc.collect()
    server0, cpu0, wall0 = server() if server else 0.0, time.process_time(), time.perf_counter()
    if prof:
        prof.enable()
    yield out
    if prof:
        prof.disable()
    out["wall_ms"] = (time.perf_counter() - wall0) * 1000 / turns
    out["cpu_ms"] = (time.process_time() - cpu0) * 1000 / turns
    if server:
        out["server_cpu_ms"] = (server() - server0) / turns


def fleet(spec: dict) -> dict:
    """The timed fleet on the run's database, then (SQLite) the statements of ``COUNT_THREADS``
    more threads on a second file, then the peak RSS."""
    threads, turns = spec["threads"], spec["threads"] * TURNS
    prepare(max(threads, COUNT_THREADS))
    prof = AllThreads() if spec.get("profile") else None
    counting = spec["backend"] == "sqlite" and spec.get("count", True)
    counts, trace = _counter()
    if spec["is_async"]:
        out = asyncio.run(_afleet(spec, prof, trace if counting else None))
    else:
        with opened(spec) as saver:
            graph = agent(saver)
            with measuring(saver, turns, prof) as out:
                _sync_fleet(graph, threads)
            _check(graph.get_state(config(threads - 1)).values, spec["name"])
        if counting:
            with opened(spec, spec["where"] + ".count") as saver:
                graph = agent(saver)
                saver.conn.set_trace_callback(trace)
                _sync_fleet(graph, COUNT_THREADS)
                saver.conn.set_trace_callback(None)
    out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if counting:
        out["statements"] = {k: v / (COUNT_THREADS * TURNS) for k, v in counts.items()}
    if prof:
        _write_profile(prof, spec["profile"], turns)
    return out


async def _afleet(spec: dict, prof: AllThreads | None, trace: Any) -> dict:
    async with aopened(spec) as saver:
        graph = agent(saver)
        with measuring(saver, spec["threads"] * TURNS, prof) as out:
            await _async_fleet(graph, spec["threads"], spec["concurrency"])
        _check((await graph.aget_state(config(spec["threads"] - 1))).values, spec["name"])
    if trace:
        async with aopened(spec, spec["where"] + ".count") as saver:
            graph = agent(saver)
            await saver.conn.set_trace_callback(trace)
            await _async_fleet(graph, COUNT_THREADS, spec["concurrency"])
            await saver.conn.set_trace_callback(None)
    return out


def _read_threads(threads: int) -> list[int]:
    """``GETS`` threads spread over the fleet (all of them when fewer)."""
    k = min(GETS, threads)
    return [round(i * (threads - 1) / max(k - 1, 1)) for i in range(k)]


def cold(spec: dict) -> dict:
    """A new process on the existing database: the first open, then one get of each of
    ``GETS`` threads (ms)."""
    picks = _read_threads(spec["threads"])
    saver_class(spec["backend"], spec["official"], spec["is_async"])  # imported before the clock starts
    if spec["is_async"]:
        return asyncio.run(_acold(spec, picks))
    clock = time.perf_counter
    start = clock()
    with opened(spec) as saver:
        open_s = clock() - start
        gets = []
        for t in picks:
            start = clock()
            got = saver.get_tuple(config(t))
            gets.append((clock() - start) * 1000)
            _check(got.checkpoint["channel_values"], spec["name"])
    return {"open_ms": open_s * 1000, "first_get_ms": gets[0], "get_p50_ms": statistics.median(gets)}


async def _acold(spec: dict, picks: list[int]) -> dict:
    clock = time.perf_counter
    start = clock()
    async with aopened(spec) as saver:
        open_s = clock() - start
        gets = []
        for t in picks:
            start = clock()
            got = await saver.aget_tuple(config(t))
            gets.append((clock() - start) * 1000)
            _check(got.checkpoint["channel_values"], spec["name"])
    return {"open_ms": open_s * 1000, "first_get_ms": gets[0], "get_p50_ms": statistics.median(gets)}


class AllThreads:
    """cProfile of this thread and of every thread started while enabled (LangGraph writes
    checkpoints from a background thread under its default durability), timed in each
    thread's own CPU time (``time.thread_time``): waits for locks, queues and disk syncs
    are left out."""

    def __init__(self) -> None:
        self.profiles = [cProfile.Profile(time.thread_time)]

    def _start(self, *_: Any) -> None:  # the first profile event of a new thread
        self.profiles.append(cProfile.Profile(time.thread_time))
        self.profiles[-1].enable()

    def enable(self) -> None:
        threading.setprofile(self._start)
        self.profiles[0].enable()

    def disable(self) -> None:
        self.profiles[0].disable()
        threading.setprofile(None)

    def stats(self, stream: Any) -> pstats.Stats:
        return pstats.Stats(*self.profiles, stream=stream)


def _write_profile(prof: AllThreads, stem: str, turns: int) -> None:
    out = io.StringIO()
    prof.stats(out).dump_stats(stem + ".prof")
    out.write(f"cProfile of {turns} turns, all threads, CPU time of each thread ({Path(stem).name}); "
              f"times are totals: divide by {turns} for per turn\n")
    for key in ("tottime", "cumulative"):
        out.write(f"\n=== top 40 by {key} ===\n")
        prof.stats(out).sort_stats(key).print_stats(40)
    Path(stem + ".txt").write_text(out.getvalue())


# --- the parent: pairs of runs, each in its own processes ---------------------------------------------------


def _child(kind: str, spec: dict, prefix: list[str] | None = None) -> dict:
    cmd = [*(prefix or []), sys.executable, __file__, "--child", kind, json.dumps(spec)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-5000:])
        raise SystemExit(f"chat fleet: the {kind} process of {spec['name']} failed (exit {proc.returncode})")
    return json.loads(next(line for line in reversed(proc.stdout.splitlines()) if line.startswith("{")))


def in_process(kind: str, spec: dict) -> dict:
    """``_child`` without the process (for tests: peak RSS is then the caller's)."""
    return (fleet if kind == "fleet" else cold)(spec)


def one_run(spec: dict, tmp: str, n: int, child: Any = _child) -> dict:
    """Fleet then cold reader on a fresh database, each in a new process: the run's figures."""
    spec = dict(spec)
    if spec["backend"] == "sqlite":
        spec["where"] = os.path.join(tmp, f"run{n}.db")
    else:
        db = f"tl_fleet_{os.getpid()}_{n}"
        _admin(f'DROP DATABASE IF EXISTS "{db}"')
        _admin(f'CREATE DATABASE "{db}"')
        spec["where"], before = _db_url(db), _db_size(db)
    try:
        res = child("fleet", spec)
        if spec["backend"] == "sqlite":
            res["bytes"] = sum(os.path.getsize(p) for p in (spec["where"], spec["where"] + "-wal") if os.path.exists(p))
        else:
            res["bytes"] = _db_size(db) - before
        res.update(child("cold", spec))
    finally:
        if spec["backend"] == "sqlite":
            for p in Path(tmp).glob(f"run{n}.db*"):
                p.unlink()
        else:
            _admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    return res


def specs(args: argparse.Namespace, postgres: bool) -> list[dict]:
    out = []
    for is_async in (False, True):
        for backend in ("sqlite", "postgres") if postgres else ("sqlite",):
            for official in (True, False):
                out.append({"backend": backend, "is_async": is_async, "official": official,
                            "name": f"{'official' if official else 'threadline'} {NAMES[backend, is_async]}",
                            "threads": args.async_threads if is_async else args.threads, "concurrency": args.concurrency})
    return out


def run(args: argparse.Namespace, postgres: bool, child: Any = _child) -> list[dict]:
    """Every saver ``args.pairs`` times (official then threadline, all groups interleaved):
    ``[{"spec": …, "runs": [figures of each run]}]``."""
    results = [{"spec": s, "runs": []} for s in specs(args, postgres)]
    n = 0
    with tempfile.TemporaryDirectory(prefix="threadline-fleet-") as tmp:
        for pair in range(args.pairs):
            for r in results:
                t0 = time.perf_counter()
                r["runs"].append(one_run(r["spec"], tmp, n, child))
                n += 1
                f = r["runs"][-1]
                print(f"  pair {pair + 1}/{args.pairs} {r['spec']['name']}: CPU {f['cpu_ms']:.2f} ms/turn, wall {f['wall_ms']:.2f} ms/turn, "
                      f"get p50 {f['get_p50_ms']:.2f} ms ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return results


def profile(args: argparse.Namespace, out_dir: str) -> list[str]:
    """cProfile (and py-spy, when installed) of the sync SQLite fleet, each saver in its own process."""
    os.makedirs(out_dir, exist_ok=True)
    written = []
    py_spy = shutil.which("py-spy", path=os.path.dirname(sys.executable)) or shutil.which("py-spy")
    with tempfile.TemporaryDirectory(prefix="threadline-fleet-prof-") as tmp:
        for official in (False, True):
            stem = os.path.join(os.path.abspath(out_dir), f"chat_fleet-{'official' if official else 'threadline'}-sqlite")
            spec = {"backend": "sqlite", "is_async": False, "official": official, "name": Path(stem).name, "count": False,
                    "threads": args.threads, "concurrency": args.concurrency, "where": os.path.join(tmp, f"{official}.db"),
                    "profile": stem}
            _child("fleet", spec)
            written += [stem + ".prof", stem + ".txt"]
            if py_spy:  # sampling, the whole worker process (imports and open included)
                spec = {**spec, "profile": None, "where": spec["where"] + ".spy"}
                raw = stem + ".py-spy.raw"
                _child("fleet", spec, prefix=[py_spy, "record", "--rate", "250", "--nonblocking", "--format", "raw", "-o", raw, "--"])
                Path(stem + ".py-spy.txt").write_text(_spy_summary(raw, Path(stem).name))
                written += [raw, stem + ".py-spy.txt"]
    return written


def _spy_summary(raw: str, name: str, top: int = 40) -> str:
    """The top functions of py-spy's collapsed stacks: by samples where they ran themselves
    (self) and by samples where they were on the stack (inclusive)."""
    own: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    for line in Path(raw).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n, frames = int(count), stack.split(";")
        total += n
        own[frames[-1]] = own.get(frames[-1], 0) + n
        for f in set(frames):
            incl[f] = incl.get(f, 0) + n
    out = [f"py-spy samples of {name} (whole process, 250 Hz): {total}"]
    for title, table in (("self", own), ("inclusive", incl)):
        out += ["", f"=== top {top} by {title} samples ===", f"{'samples':>8} {'%':>6}  function"]
        for f, n in sorted(table.items(), key=lambda kv: -kv[1])[:top]:
            out.append(f"{n:8d} {100 * n / max(total, 1):5.1f}%  {f}")
    return "\n".join(out) + "\n"


# --- the report ------------------------------------------------------------------------------------------


ROWS = [  # (label, key, format: None for bytes)
    ("client CPU ms/turn", "cpu_ms", "{:.2f}"),
    ("wall ms/turn", "wall_ms", "{:.2f}"),
    ("Postgres server CPU ms/turn (the saver's backend)", "server_cpu_ms", "{:.2f}"),
    ("get-latest p50 ms, new process (25 threads of 16 messages)", "get_p50_ms", "{:.2f}"),
    ("first get_tuple ms, new process", "first_get_ms", "{:.2f}"),
    ("first open ms (`from_conn_string` + `setup()`), existing database", "open_ms", "{:.1f}"),
    ("storage after the fleet", "bytes", None),
    ("SQL statements/turn (SELECT+INSERT+UPDATE+DELETE)", "statements", None),
    ("peak RSS MB (worker)", "rss_mb", "{:.1f}"),
]


def _median(runs: list[dict], key: str) -> float | None:
    vals = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def _cell(runs: list[dict], key: str, fmt: str | None) -> str:
    if key == "statements":
        st = runs[0].get("statements")  # deterministic: the same in every run
        if st is None:
            return "—"
        return f"{sum(st.values()):.1f} ({', '.join(f'{k[0]} {v:.1f}' for k, v in st.items() if v)})"
    v = _median(runs, key)
    if v is None:
        return "—"
    return fmt_bytes(v) if fmt is None else fmt.format(v)


def _value(runs: list[dict], key: str) -> float | None:
    if key == "statements":
        st = runs[0].get("statements")
        return sum(st.values()) if st else None
    return _median(runs, key)


def render(results: list[dict], args: argparse.Namespace, header: str | None = None) -> str:
    lines = [header if header is not None else machine(), "",
             f"Command: `benchmarks/chat_fleet.py --threads {args.threads} --async-threads {args.async_threads} "
             f"--concurrency {args.concurrency} --pairs {args.pairs}`. A real `create_react_agent` (fake chat model, two "
             f"tools), {TURNS} turns per thread, a turn = one `invoke` (4 messages of ~300–800 bytes, 4 checkpoints); every "
             f"run on a fresh database in a fresh process; medians over {args.pairs} interleaved pair(s). Ratios: threadline ÷ "
             f"official (< 1: threadline less or faster).", ""]
    for is_async, title in ((False, f"sync: {args.threads} threads × {TURNS} turns, one after another (`invoke`)"),
                            (True, f"async: {args.async_threads} threads × {TURNS} turns, {args.concurrency} at once (`ainvoke`)")):
        group = [r for r in results if r["spec"]["is_async"] == is_async]
        backends = [b for b in ("sqlite", "postgres") if any(r["spec"]["backend"] == b for r in group)]
        if not group:
            continue
        lines += [f"### Chat fleet, {title}", ""]
        head, rule = ["figure"], ["---"]
        for b in backends:
            head += [f"official {NAMES[b, is_async]}", f"threadline {NAMES[b, is_async]}", "ratio"]
            rule += ["---"] * 3
        lines += ["| " + " | ".join(head) + " |", "|" + "|".join(rule) + "|"]
        for label, key, fmt in ROWS:
            cells = [label]
            for b in backends:
                off, ours = (next(r["runs"] for r in group if r["spec"]["backend"] == b and r["spec"]["official"] == o) for o in (True, False))
                vo, vt = _value(off, key), _value(ours, key)
                ratio = f"{vt / vo:.2f}×" if vo and vt is not None else "—"
                if key == "rss_mb" and vo and vt is not None:
                    ratio += f" ({vt - vo:+.1f} MB)"
                cells += [_cell(off, key, fmt), _cell(ours, key, fmt), ratio]
            if any(c != "—" for c in cells[1:]):
                lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        spread = []
        for r in group:
            cpu = ", ".join(f"{x['cpu_ms']:.2f}" for x in r["runs"])
            get = ", ".join(f"{x['get_p50_ms']:.2f}" for x in r["runs"])
            spread.append(f"{r['spec']['name']}: CPU ms/turn {cpu}; get p50 ms {get}")
        lines += ["Each pair: " + "; ".join(spread) + ".", ""]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=200, help="threads of the sync fleet")
    ap.add_argument("--async-threads", type=int, default=96, help="threads of the async fleet")
    ap.add_argument("--concurrency", type=int, default=16, help="async conversations at once")
    ap.add_argument("--pairs", type=int, default=5, help="interleaved official/threadline pairs (0: no table, --profile alone)")
    ap.add_argument("--no-postgres", action="store_true")
    ap.add_argument("--profile", metavar="DIR", help="also profile the sync SQLite fleet into DIR")
    ap.add_argument("--write-results", action="store_true")
    ap.add_argument("--child", nargs=2, metavar=("KIND", "SPEC"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        kind, spec = args.child
        print(json.dumps(in_process(kind, json.loads(spec))))
        return 0
    postgres = not args.no_postgres
    if postgres and (reason := postgres_reason()):
        print(f"Postgres skipped: {reason}", file=sys.stderr)
        postgres = False
    t0 = time.perf_counter()
    if args.pairs:  # --pairs 0 --profile DIR: the profiles alone
        print(f"chat fleet: {args.threads} threads (sync), {args.async_threads} (async) × {TURNS} turns, {args.pairs} pairs",
              file=sys.stderr)
        md = render(run(args, postgres), args)
        print(md)
        print(f"chat fleet: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        if args.write_results:
            write_results(md, START, END)
    if args.profile:
        for path in profile(args, args.profile):
            print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
