"""Per call CPU of a saver, threadline vs the official savers (issue 43, target 1): put,
put_writes, get (warm and cold) and the time-travel reads of a recorded short conversation.

Usage::

    .venv/bin/python benchmarks/per_call.py [--threads 30] [--rounds 5] [--cold 25]
        [--long-turns 25] [--points 20] [--forks 5] [--postgres | --no-postgres] [--write-results]

Method:

* **Recording** (once, before anything is timed): ``chat_fleet.py``'s ``create_react_agent``
  (a fake chat model: a user message gets one tool call, the tool's answer a reply; messages of
  ~300–800 bytes) runs on an ``InMemorySaver`` whose ``put`` / ``put_writes`` / ``get_tuple``
  pickle their arguments at call time: ``--threads`` + 1 conversations of 4 turns (each its
  own texts, so no saver gains from identical bytes across threads; the extra one is a warm-up)
  and one of ``--long-turns`` turns. 4 turns = 4 gets, 20 puts, 16 put_writes. LangGraph's
  live runtime handle (``__pregel_runtime``, unpicklable, read by no saver) is left out of
  the configs.
* **Savers**: the official ``SqliteSaver`` and threadline's, each on its own fresh file, each
  opened by its own ``from_conn_string`` + ``setup()`` (their default PRAGMAs: both WAL and
  ``synchronous=FULL``, printed in the report); with ``--postgres`` (the default when the server
  at ``THREADLINE_TEST_POSTGRES``, default ``postgresql://postgres@127.0.0.1:5432/test``,
  answers) the official ``PostgresSaver`` and threadline's, each in a fresh schema of its own
  (``options=-csearch_path=…``), both with server-prepared statements (their default).
* **Per round** (``--rounds``, fresh databases each): (1) every saver open at once; the warm-up
  conversation replayed on each, not counted (statement preparation, first use); then thread
  after thread, each thread's recorded calls replayed on every saver in turn, the order of the
  savers rotating from thread to thread and round to round, so a change of the machine's speed
  weighs on all alike. A thread's first ``get_tuple`` finds nothing (a new thread), its later
  ones read the latest checkpoint through the saver that wrote it (warm). (2) Bytes on disk:
  the SQLite file after ``PRAGMA wal_checkpoint(TRUNCATE)``, the Postgres schema's tables
  (``pg_total_relation_size``: indexes and TOAST included). (3) The long thread written,
  not counted; the savers closed. (4) A NEW saver per database (empty caches): one get, a
  ``get_state``, a history and a fork on the warm-up thread, not counted (statement
  preparation); then ``get_tuple`` of the latest checkpoint of ``--cold`` threads (cold get),
  interleaved as above. (5) Time travel on the long thread through the real compiled graph
  on those new savers, interleaved: ``graph.get_state`` at ``--points`` older checkpoints
  spread over the thread, ``list(graph.get_state_history(config))`` twice, and ``--forks``
  ``graph.update_state(older_config, values)`` (a fork: a new branch from an older checkpoint).
* **CPU**: ``time.thread_time_ns`` of the calling thread around each call (the saver, its
  driver, and for the graph calls LangGraph's own work); for Postgres also the CPU of the
  server backend serving the saver's connection (``/proc/<backend_pid>/schedstat``, first
  field; a server on this machine), read before and after the call, outside the client's
  window. Garbage collection stays on: a saver that allocates more pays for it. The
  time-travel calls, few and large, each start from a collected heap (``gc.collect()`` outside
  the clock; what was alive before the phase frozen, ``gc.freeze``), so that a full collection
  of everything the four savers of this one process hold, left pending by an earlier call,
  does not land on whichever call trips it.
* **Report**: per call kind, the median [min–max] over the rounds of each saver's mean µs
  per call, and threadline ÷ official: the median [min–max] of the round-by-round ratios
  (both savers measured in the same round, interleaved). Issue 43's target: every ratio ≤ 1.00×.

``--write-results`` rewrites the ``<!-- per-call:start -->`` section of ``RESULTS.md``.
Figures, never assertions; the replies are checked (a cold get must return the thread's 16
messages, a history every checkpoint) so that a broken saver cannot look fast.
"""

from __future__ import annotations

import argparse
import gc
import os
import pickle
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

import chat_fleet as CF  # noqa: E402
from run_report import fmt_bytes, machine, write_results  # noqa: E402

START, END = "<!-- per-call:start -->", "<!-- per-call:end -->"
LONG = 10_000  # the long thread's number (chat_fleet's texts are seeded by it: its own messages)
HISTORY = 2  # get_state_history calls per saver and round (a 125-checkpoint history: ~0.3–0.5 s of CPU)
KINDS = {  # kind → label (report order)
    "put": "put",
    "put_writes": "put_writes",
    "get_warm": "get_tuple, latest, the saver that wrote (warm)",
    "get_cold": "get_tuple, latest, a new saver (cold)",
    "get_new": "get_tuple, a new thread (nothing there)",
    "get_state": "graph.get_state at an older checkpoint",
    "history": "list(graph.get_state_history)",
    "fork": "graph.update_state at an older checkpoint (a fork)",
}
Calls = list[tuple[str, bytes]]  # (saver method, its pickled positional arguments)


# --- the recording ------------------------------------------------------------------------------------


def _picklable(value: Any) -> bool:
    try:
        pickle.dumps(value)
    except Exception:
        return False
    return True


def _portable(config: dict) -> dict:
    """``config`` without what cannot be pickled (LangGraph's live ``__pregel_runtime``)."""
    out = {k: v for k, v in config.items() if k != "configurable" and _picklable(v)}
    out["configurable"] = {k: v for k, v in config.get("configurable", {}).items() if _picklable(v)}
    return out


def recorded_calls(threads: list[int], build: Callable[[Any], Any], run: Callable[[Any, int], None]) -> dict[int, Calls]:
    """Thread number → the saver calls LangGraph makes in ``run(graph, thread)``, ``graph`` being
    ``build(saver)`` on an ``InMemorySaver`` (thread ids ending in ``-<number>``), each call's
    arguments pickled at call time (a later mutation cannot leak in)."""
    from langgraph.checkpoint.memory import InMemorySaver

    saver, calls = InMemorySaver(), defaultdict(list)

    def recording(name: str) -> Callable:
        method = getattr(saver, name)

        def wrapped(config: dict, *rest: Any) -> Any:  # LangGraph passes them positionally
            thread = int(config["configurable"]["thread_id"].rsplit("-", 1)[1])
            calls[thread].append((name, pickle.dumps((_portable(config), *rest))))
            return method(config, *rest)

        return wrapped

    for name in ("put", "put_writes", "get_tuple"):
        setattr(saver, name, recording(name))
    graph = build(saver)
    for t in threads:
        run(graph, t)
    return dict(calls)


def record(threads: list[int], turns: int) -> dict[int, Calls]:
    """Thread number → the saver calls of its ``turns``-turn chat conversation (``recorded_calls``)."""

    def converse(graph: Any, t: int) -> None:
        for turn in range(turns):
            graph.invoke(CF.user_message(t, turn), CF.config(t))

    return recorded_calls(threads, CF.agent, converse)


# --- savers, databases, clocks ----------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """One saver's fresh database for one round: a SQLite file, or a Postgres schema."""

    backend: str  # "sqlite" | "postgres"
    official: bool
    where: str  # the file, or the DSN with the schema on its search_path
    schema: str = ""

    @property
    def key(self) -> tuple[str, bool]:
        return self.backend, self.official

    def open(self) -> Any:
        """A context manager: the saver, opened by its ``from_conn_string`` and set up."""
        return CF.opened({"backend": self.backend, "official": self.official, "where": self.where})


def _label(key: tuple[str, bool]) -> str:
    return f"{'official' if key[1] else 'threadline'} {CF.NAMES[key[0], False]}"


def fresh_targets(tmp: str, round_: int, postgres: bool) -> list[Target]:
    """The round's databases: a new SQLite file per saver, a new schema per Postgres saver."""
    out = [Target("sqlite", official, os.path.join(tmp, f"r{round_}-{official}.db")) for official in (True, False)]
    if postgres:
        for official in (True, False):
            schema = f"per_call_{os.getpid()}_{round_}_{'official' if official else 'threadline'}"
            drop_schemas([schema])
            CF._admin(f'CREATE SCHEMA "{schema}"')
            sep = "&" if "?" in CF.PG_DSN else "?"
            dsn = f"{CF.PG_DSN}{sep}options={quote(f'-csearch_path={schema}', safe='')}"
            out.append(Target("postgres", official, dsn, schema))
    return out


def drop_schemas(schemas: list[str]) -> None:
    for schema in schemas:
        CF._admin(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def bytes_on_disk(target: Target, saver: Any) -> int:
    """The SQLite file (its WAL checkpointed into it) or the schema's tables, indexes and TOAST."""
    if target.backend == "sqlite":
        saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return sum(os.path.getsize(p) for p in (target.where, target.where + "-wal") if os.path.exists(p))
    return int(CF._admin(
        "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN pg_namespace n "
        f"ON n.oid = c.relnamespace WHERE n.nspname = '{target.schema}' AND c.relkind = 'r'")[0])


def server_clock(saver: Any) -> Callable[[], int] | None:
    """ns of CPU used so far by the Postgres backend serving ``saver``'s connection, or None
    (SQLite; a server on another machine)."""
    pid = getattr(getattr(getattr(saver, "conn", None), "info", None), "backend_pid", None)
    path = f"/proc/{pid}/schedstat"
    if not pid or not os.path.exists(path):
        return None

    def read() -> int:
        with open(path) as f:
            return int(f.read().split()[0])

    return read


class Tally:
    """Per saver and call kind: ns of client and server CPU summed, and the calls counted."""

    def __init__(self) -> None:
        self.sums: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0])

    def call(self, target: Target, kind: str | None, server: Callable[[], int] | None, fn: Callable, *args: Any) -> Any:
        """``fn(*args)``, its CPU added under ``kind`` (None: run, not counted)."""
        s0 = server() if server else 0
        c0 = time.thread_time_ns()
        out = fn(*args)
        client = time.thread_time_ns() - c0
        if kind is not None:
            row = self.sums[target.key, kind]
            row[0] += client
            row[1] += server() - s0 if server else 0
            row[2] += 1
        return out

    def means(self) -> dict[tuple, tuple[float, float]]:
        """(saver key, kind) → (client, server) µs per call."""
        return {k: (c / n / 1000, s / n / 1000) for k, (c, s, n) in self.sums.items()}


def rotated(items: list, k: int) -> list:
    k %= len(items)
    return items[k:] + items[:k]


# --- one round ------------------------------------------------------------------------------------------


def replay(tally: Tally, savers: dict[Target, tuple[Any, Any]], conv: Calls, order: list[Target], counted: bool) -> None:
    """One thread's recorded calls on every saver of ``order``, one saver after the other."""
    for target in order:
        saver, server = savers[target]
        wrote = False
        for name, blob in conv:
            args = pickle.loads(blob)  # a fresh copy for each saver, outside the clock
            kind = name if name != "get_tuple" else "get_warm" if wrote else "get_new"
            tally.call(target, kind if counted else None, server, getattr(saver, name), *args)
            wrote = wrote or name == "put"


def _at(checkpoint_id: str, thread: int = LONG) -> dict:
    return {"configurable": {"thread_id": f"chat-{thread}", "checkpoint_ns": "", "checkpoint_id": checkpoint_id}}


def _fork_values(i: int) -> dict:
    return {"messages": [{"role": "user", "content": CF._text(f"fork {i}", 300), "id": f"fork-{i}"}]}


def _put_ids(conv: Calls) -> list[str]:
    return [pickle.loads(blob)[1]["id"] for name, blob in conv if name == "put"]


def one_round(args: argparse.Namespace, r: int, calls: dict[int, Calls], tmp: str, postgres: bool) -> tuple[dict, dict]:
    """(µs per call: (saver key, kind) → (client, server); bytes on disk: saver key → bytes)."""
    targets = fresh_targets(tmp, r, postgres)
    tally, sizes, warm = Tally(), {}, args.threads  # the warm-up conversation's number
    phases = [time.perf_counter()]  # wall s at each phase's end, for the progress line
    try:
        with ExitStack() as stack:  # (1)–(3): the writers
            savers = {}
            for t in targets:
                saver = stack.enter_context(t.open())
                savers[t] = (saver, server_clock(saver))
            replay(tally, savers, calls[warm], targets, counted=False)
            gc.collect()
            for thread in range(args.threads):
                replay(tally, savers, calls[thread], rotated(targets, thread + r), counted=True)
            sizes = {t.key: bytes_on_disk(t, savers[t][0]) for t in targets}
            phases.append(time.perf_counter())
            replay(tally, savers, calls[LONG], targets, counted=False)
        with ExitStack() as stack:  # (4)–(5): new savers
            readers, first = {}, _put_ids(calls[warm])[1]
            for t in targets:
                saver = stack.enter_context(t.open())
                graph = CF.agent(saver)
                readers[t] = (saver, server_clock(saver), graph)
                # statement preparation and first use, on the warm-up thread: not counted
                saver.get_tuple({"configurable": {"thread_id": f"chat-{warm}", "checkpoint_ns": ""}})
                graph.get_state(_at(first, warm))
                list(graph.get_state_history(CF.config(warm)))
                graph.update_state(_at(first, warm), _fork_values(-1))
            gc.collect()
            cold_reads(tally, readers, args, r)
            phases.append(time.perf_counter())
            time_travel(tally, readers, args, r, _put_ids(calls[LONG]))
            phases.append(time.perf_counter())
            if threading.active_count() > 1:  # thread_time_ns would miss their work
                print(f"note: {threading.active_count() - 1} other threads ran beside the timed calls", file=sys.stderr)
    finally:
        drop_schemas([t.schema for t in targets if t.schema])
    steps = ("replay", "long thread and cold gets", "time travel")
    walls = ", ".join(f"{what} {b - a:.0f} s" for what, a, b in zip(steps, phases, phases[1:]))
    print(f"  round {r + 1}/{args.rounds}: {walls}", file=sys.stderr)
    return tally.means(), sizes


def cold_reads(tally: Tally, readers: dict, args: argparse.Namespace, r: int) -> None:
    """The latest checkpoint of ``--cold`` threads, each read once by every new saver in turn."""
    for thread in range(min(args.cold, args.threads)):
        config = {"configurable": {"thread_id": f"chat-{thread}", "checkpoint_ns": ""}}
        for target in rotated(list(readers), thread + r):
            saver, server, _ = readers[target]
            found = tally.call(target, "get_cold", server, saver.get_tuple, config)
            if found is None or len(found.checkpoint["channel_values"]["messages"]) != 4 * CF.TURNS:
                raise SystemExit(f"{_label(target.key)}: thread {thread} did not read back its {4 * CF.TURNS} messages")


def older_points(ids: list[str], points: int) -> list[str]:
    """``points`` checkpoint ids spread evenly over all but the latest."""
    older = ids[:-1]
    picks = [older[round(i * (len(older) - 1) / max(points - 1, 1))] for i in range(min(points, len(older)))]
    return list(dict.fromkeys(picks))


def time_travel(tally: Tally, readers: dict, args: argparse.Namespace, r: int, ids: list[str]) -> None:
    """get_state at older checkpoints, the whole history, forks: the real graph on every new saver.
    What was alive before is frozen (``gc.freeze``) and each call starts from a collected heap:
    a call pays for the collections its own allocations trigger, not for a full collection of
    all four savers' caches left pending by an earlier call (a 125-checkpoint history: ~0.3 s
    or ~0.6 s of CPU depending on it)."""
    gc.collect()
    gc.freeze()
    try:
        _time_travel(tally, readers, args, r, ids)
    finally:
        gc.unfreeze()


def _time_travel(tally: Tally, readers: dict, args: argparse.Namespace, r: int, ids: list[str]) -> None:
    order = list(readers)
    points = older_points(ids, args.points)
    for i, cid in enumerate(points):
        for target in rotated(order, i + r):
            _, server, graph = readers[target]
            gc.collect()
            snap = tally.call(target, "get_state", server, graph.get_state, _at(cid))
            if snap.config["configurable"]["checkpoint_id"] != cid:
                raise SystemExit(f"{_label(target.key)}: get_state({cid}) read {snap.config['configurable']['checkpoint_id']}")
    for i in range(HISTORY):
        for target in rotated(order, i + r):
            _, server, graph = readers[target]
            gc.collect()
            history = tally.call(target, "history", server, lambda g=graph: list(g.get_state_history(CF.config(LONG))))
            if len(history) != len(ids):
                raise SystemExit(f"{_label(target.key)}: a history of {len(history)} checkpoints, not {len(ids)}")
    for i, cid in enumerate(points[:: max(len(points) // max(args.forks, 1), 1)][: args.forks]):
        for target in rotated(order, i + r):
            _, server, graph = readers[target]
            gc.collect()
            tally.call(target, "fork", server, graph.update_state, _at(cid), _fork_values(i))


# --- the report -----------------------------------------------------------------------------------------


PARTS = [  # (Postgres: which CPU, read from a saver's (client, server) µs)
    ("client", lambda v: v[0]), ("server", lambda v: v[1]), ("client + server", lambda v: v[0] + v[1])]


def _spread(xs: list[float], fmt: str) -> str:
    return f"{fmt.format(statistics.median(xs))} [{fmt.format(min(xs))}–{fmt.format(max(xs))}]"


def _ratios(ours: list[float], theirs: list[float]) -> str:
    pairs = [a / b for a, b in zip(ours, theirs) if b]
    return _spread(pairs, "{:.2f}×") if pairs else "—"


def render(rounds: list[tuple[dict, dict]], args: argparse.Namespace, pragmas: dict, header: str | None = None) -> str:
    """The Markdown report: a table per backend."""
    n_long = args.long_checkpoints
    labels = dict(KINDS, get_state=f"{KINDS['get_state']} ({min(args.points, n_long - 1)} of {n_long})",
                  history=f"{KINDS['history']} ({n_long} checkpoints)")
    backends = [b for b in ("sqlite", "postgres") if any(k[0] == b for k, _ in rounds[0][0])]
    command = (f"benchmarks/per_call.py --threads {args.threads} --rounds {args.rounds} --cold {args.cold} --long-turns "
               f"{args.long_turns} --points {args.points} --forks {args.forks}{'' if 'postgres' in backends else ' --no-postgres'}")
    made = ", ".join(f"{n} {name}" for name, n in args.made.items())
    method = (f"The recorded {CF.TURNS}-turn `create_react_agent` conversation ({made}) replayed on {args.threads} threads, every saver open at once, interleaved thread by "
              f"thread; cold gets on {min(args.cold, args.threads)} threads by a new saver; time travel on one "
              f"{args.long_turns}-turn thread through the compiled graph on that new saver. µs of CPU per call: median "
              "[min–max] over the rounds of each saver's mean; ratio: threadline ÷ official, round by round (target ≤ 1.00×).")
    pragmas_line = "; ".join(f"{_label(k)} {v}" for k, v in pragmas.items())
    load = f"\n- load average (1 min) at the start / the end of the run: {args.load[0]:.1f} / {args.load[1]:.1f}" if header is None else ""
    lines = [(header if header is not None else machine()) + load, "", f"Command: `{command}`. {method}", "",
             f"SQLite PRAGMAs as each saver sets them: {pragmas_line}.", ""]
    for backend in backends:
        off, ours = (backend, True), (backend, False)
        pg = backend == "postgres"
        lines += [f"### {CF.NAMES[backend, False]}", "",
                  f"| call |{' CPU |' if pg else ''} {_label(off)} µs | {_label(ours)} µs | threadline ÷ official |",
                  f"|---|{'---|' if pg else ''}---|---|---|"]
        for kind, label in labels.items():
            if not all((off, kind) in means for means, _ in rounds):
                continue
            series = {k: [means[k, kind] for means, _ in rounds] for k in (off, ours)}
            for part, pick in PARTS if pg else PARTS[:1]:
                o, t = ([pick(v) for v in series[k]] for k in (off, ours))
                cpu = f" {part} |" if pg else ""
                lines.append(f"| {label} |{cpu} {_spread(o, '{:,.0f}')} | {_spread(t, '{:,.0f}')} | {_ratios(t, o)} |")
        o, t = ([sizes[k] for _, sizes in rounds] for k in (off, ours))
        lines.append(f"| bytes on disk after the {args.threads} threads |{' |' if pg else ''} {fmt_bytes(statistics.median(o))} | "
                     f"{fmt_bytes(statistics.median(t))} | {_ratios(t, o)} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def sqlite_pragmas(tmp: str) -> dict:
    """Each SQLite saver's journal mode and synchronous level as its ``from_conn_string`` + ``setup()`` leave them."""
    out = {}
    for official in (True, False):
        target = Target("sqlite", official, os.path.join(tmp, f"pragmas-{official}.db"))
        with target.open() as saver:
            mode = saver.conn.execute("PRAGMA journal_mode").fetchone()[0]
            sync = saver.conn.execute("PRAGMA synchronous").fetchone()[0]
        out[target.key] = f"journal_mode={mode}, synchronous={['OFF', 'NORMAL', 'FULL', 'EXTRA'][sync]}"
    return out


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=30, help="threads replayed per round (each the 4-turn conversation)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds, each on fresh databases")
    ap.add_argument("--cold", type=int, default=25, help="threads read back by the new savers")
    ap.add_argument("--long-turns", type=int, default=25, help="turns of the time-travel thread")
    ap.add_argument("--points", type=int, default=20, help="older checkpoints read by graph.get_state")
    ap.add_argument("--forks", type=int, default=5, help="graph.update_state forks per saver and round")
    ap.add_argument("--postgres", action=argparse.BooleanOptionalAction, default=None,
                    help="the Postgres savers too (default: when the server answers)")
    ap.add_argument("--write-results", action="store_true", help="rewrite the per-call section of RESULTS.md")
    args = ap.parse_args(argv)
    if min(args.threads, args.rounds, args.long_turns, args.points) < 1:
        ap.error("--threads, --rounds, --long-turns and --points must be at least 1")
    reason = CF.postgres_reason() if args.postgres is not False else "--no-postgres"
    if reason and args.postgres:
        ap.error(f"--postgres: the server does not answer ({reason})")
    postgres = reason is None
    if args.postgres is None and reason:
        print(f"Postgres skipped: {reason}", file=sys.stderr)
    t0, load0 = time.perf_counter(), os.getloadavg()[0]
    CF.prepare(args.threads + 1)
    calls = record(list(range(args.threads + 1)), CF.TURNS) | record([LONG], args.long_turns)
    args.long_checkpoints = len(_put_ids(calls[LONG]))
    args.made = Counter(name for name, _ in calls[0])  # the calls of one conversation
    print(f"per call: recorded in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    rounds = []
    with tempfile.TemporaryDirectory(prefix="threadline-per-call-") as tmp:
        pragmas = sqlite_pragmas(tmp)
        for r in range(args.rounds):
            rounds.append(one_round(args, r, calls, tmp, postgres))
    args.load = load0, os.getloadavg()[0]
    md = render(rounds, args, pragmas)
    print(md)
    print(f"per call: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    if args.write_results:
        write_results(md, START, END)
    return md


if __name__ == "__main__":
    main()
