"""LangGraph's own benchmark graphs with a durable saver, threadline vs the official savers
(issue 43, target 2: each graph at ≤ 1.0× the official's CPU and wall, never more bytes).

Usage::

    .venv/bin/python benchmarks/lg_graphs.py [--runs 5] [--graphs NAME,...] [--postgres | --no-postgres]
        [--quick] [--breakdown] [--write-results]

The graphs: our own equivalents (rewritten, not copied) of the graphs of ``libs/langgraph/bench``
in the LangGraph repository, with the same shapes and sizes, each compiled with a durable saver:

* ``react_agent_10`` / ``react_agent_100`` mirror ``bench/react_agent.py`` (``react_agent_10x`` /
  ``react_agent_100x`` of its ``__main__``): ``create_react_agent`` with a fake chat model that
  answers "hi?" with N tool calls one after the other, then a final answer (``"answer" * 100``).
  Each call's argument is a UUID repeated 100 times (3,600 bytes); the one tool returns
  ``"result for query: <argument>"`` ten times (~36 KB a tool message).
* ``wide_state_300`` mirrors ``bench/wide_state.py`` (``wide_state_25x300``): a dataclass state of
  15 channels (lists appended to, dicts merged, strings and dicts overwritten), six nodes (one
  fan-out of two and a join) that copy one channel into others, looping until ``messages`` holds
  more than 300 items; the input a 5 × 5 nested dict of lists. The 300-letter strings the nodes
  write are pseudo-random but seeded (the same on every saver, so that outputs can be compared).
* ``sequential_100`` mirrors ``bench/sequential.py``: ``MessagesState`` through a chain of 100
  no-op nodes (LangGraph's bench runs 10 and 1,000 without a saver; 100 is issue 43's size).
* ``fanout_to_subgraph_10`` mirrors ``bench/fanout_to_subgraph.py`` (``fanout_to_subgraph_10x``,
  its sync variant): 10 ``Send`` of a 1,000-letter list each to a compiled subgraph (edit,
  generate, then ``bump`` until the joke ends in ten " a"), whose checkpoints go to the parent's
  saver under their own namespaces.

LangGraph's bench streams with ``durability="exit"`` on ``InMemorySaver``; here every run is
``graph.invoke`` on a NEW thread under LangGraph's default durability (``"async"``: a checkpoint
per superstep, written from LangGraph's background thread while the next superstep runs) with a
recursion limit high enough for the graph.

Method, per graph and backend (SQLite; Postgres when the server at ``THREADLINE_TEST_POSTGRES``,
default ``postgresql://postgres@127.0.0.1:5432/test``, answers):

* a fresh database per saver (``per_call.fresh_targets``: a SQLite file each, a Postgres schema
  each), the official saver and threadline's opened by their own ``from_conn_string`` +
  ``setup()`` (``chat_fleet.opened``) and both open at once, each with the graph compiled on it;
* one warm-up run on each (statement preparation, first use; not timed, its thread counted in
  the bytes), then ``--runs`` runs each, interleaved: official then threadline on even runs,
  threadline then official on odd ones, ``gc.collect()`` before each run outside the clock;
* per run: **CPU** of the whole process (``time.process_time``; ``thread_time`` is not enough:
  under the default durability LangGraph's background writer thread makes the saver's ``put``
  calls, and the Send fan-out runs its subgraphs in a thread pool), **wall** (``perf_counter``)
  and, on Postgres, the **server's CPU** for the saver's connection (``per_call.server_clock``:
  ``/proc/<backend_pid>/schedstat`` of the server process on this machine);
* after the runs, **bytes on disk** (``per_call.bytes_on_disk``): the SQLite file after
  ``PRAGMA wal_checkpoint(TRUNCATE)``, the Postgres schema's tables with their indexes and TOAST
  (``pg_total_relation_size``); ``--breakdown`` adds each saver's bytes table by table and
  index by index (SQLite ``dbstat``; Postgres ``pg_relation_size`` of every relation).
* **checked**, so that a broken saver cannot look fast: each run's final state read back through
  the saver (``graph.get_state``) equals what ``invoke`` returned, and is the same, LangGraph's
  random message ids aside, on both savers and in every run; the number of checkpoints of the
  thread (``graph.get_state_history``, the root namespace) is the same on both savers.

Report: per graph and backend, the median [min–max] over the runs of each saver's ms per run,
and threadline ÷ official (of the medians), marked against the target (≤ 1.00×).
``--quick`` is a small run for the smoke test (``react_agent`` with 2 and 3 tool calls, ``wide_state``
to 20, 10 nodes, 3 Sends; one run each). ``--write-results`` rewrites the
``<!-- lg-graphs:start -->`` section of ``RESULTS.md``.
"""

from __future__ import annotations

import argparse
import gc
import operator
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from typing_extensions import TypedDict

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

import chat_fleet as CF  # noqa: E402
import per_call as PC  # noqa: E402
from run_report import fmt_bytes, machine, write_results  # noqa: E402

START, END = "<!-- lg-graphs:start -->", "<!-- lg-graphs:end -->"
LETTERS = "abcdefghijklmnopqrstuvwxyz"
RECURSION = 100_000


# --- the graphs --------------------------------------------------------------------------------------------


def react_agent(saver: Any, calls: int) -> Any:
    """``create_react_agent``: "hi?" answered by ``calls`` tool calls, one per model turn, then
    a final answer. A tool call's argument is 3,600 bytes, its answer ~36 KB."""
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import StructuredTool
    from langgraph.prebuilt import create_react_agent

    rng = random.Random(calls)
    ids = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(3 * calls + 1)]

    def lookup(query: str) -> str:
        return ("result for query: " + query) * 10

    tool = StructuredTool.from_function(lookup, name="lookup", description="Look something up.")
    script = [AIMessage(content="", id=ids[3 * i],
                        tool_calls=[{"id": ids[3 * i + 1], "name": "lookup", "args": {"query": ids[3 * i + 2] * 100}}])
              for i in range(calls)]
    script.append(AIMessage(content="answer" * 100, id=ids[-1]))

    class ScriptedModel(type(CF._model())):  # the chat fleet's fake model (tools bound as is), another script
        """The next scripted message: the how-many-th is the number of tool answers so far."""

        def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
            done = sum(isinstance(m, ToolMessage) for m in messages)
            return ChatResult(generations=[ChatGeneration(message=script[min(done, calls)].model_copy())])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated for langchain.agents; still LangGraph's prebuilt
        return create_react_agent(ScriptedModel(), [tool], checkpointer=saver)


def _newer(old: Any, new: Any) -> Any:
    return new


def _new_if_truthy(old: Any, new: Any) -> Any:
    return new or old


def _new_unless_none(old: Any, new: Any) -> Any:
    return old if new is None else new


@dataclass(kw_only=True)
class WideState:
    """bench/wide_state.py's state: a support-desk agent's fifteen channels."""

    messages: Annotated[list, operator.add] = field(default_factory=list)
    trigger_events: Annotated[list, operator.add] = field(default_factory=list)
    primary_issue_medium: Annotated[str, _new_if_truthy] = "email"
    autoresponse: Annotated[dict | None, _newer] = None
    issue: Annotated[dict | None, _new_if_truthy] = None
    relevant_rules: list[dict] | None = None
    memory_docs: list[dict] | None = None
    categorizations: Annotated[list[dict], operator.add] = field(default_factory=list)
    responses: Annotated[list[dict], operator.add] = field(default_factory=list)
    user_info: Annotated[dict | None, _new_unless_none] = None
    crm_info: Annotated[dict | None, _new_unless_none] = None
    email_thread_id: Annotated[str | None, _new_unless_none] = None
    slack_participants: Annotated[dict, operator.or_] = field(default_factory=dict)
    bot_id: str | None = None
    notified_assignees: Annotated[dict, operator.or_] = field(default_factory=dict)


LIST_CHANNELS = frozenset({"messages", "trigger_events", "categorizations", "responses", "memory_docs", "relevant_rules"})
DICT_CHANNELS = frozenset({"user_info", "crm_info", "slack_participants", "notified_assignees", "autoresponse", "issue"})
WIDE_NODES = {  # node → (the channel it reads, the channels it writes)
    "one": ("messages", ("trigger_events", "primary_issue_medium")),
    "two": ("trigger_events", ("autoresponse", "issue")),
    "three": ("autoresponse", ("relevant_rules",)),
    "four": ("trigger_events", ("categorizations", "responses", "memory_docs")),
    "five": ("categorizations", ("user_info", "crm_info", "email_thread_id", "slack_participants", "bot_id",
                                 "notified_assignees")),
    "six": ("responses", ("messages",)),
}


def wide_state(saver: Any, n: int) -> Any:
    """Six nodes copying one channel into others (a list channel gets the value as a list, a
    dict channel its last item, a string channel ``n`` letters), looping until ``messages``
    holds more than ``n`` items."""
    from langgraph.graph import END, START, StateGraph

    def node(name: str) -> Callable[[WideState], dict]:
        source, targets = WIDE_NODES[name]

        def run(state: WideState) -> dict:
            value = getattr(state, source)
            if isinstance(value, str):
                value = {value: value}
            as_list = value if isinstance(value, list) else [value]
            last = value[-1] if isinstance(value, list) else value
            rng = random.Random(f"{name} {len(state.messages)}")  # seeded: the same letters on every saver
            return {k: as_list if k in LIST_CHANNELS else last if k in DICT_CHANNELS else "".join(rng.choices(LETTERS, k=n))
                    for k in targets}

        return run

    builder = StateGraph(WideState)
    for name in WIDE_NODES:
        builder.add_node(name, node(name))
    for a, b in ((START, "one"), ("one", "two"), ("two", "three"), ("two", "four"), (["three", "four"], "five"),
                 ("five", "six")):
        builder.add_edge(a, b)
    builder.add_conditional_edges("six", lambda s: END if len(s.messages) > n else "one")
    return builder.compile(checkpointer=saver)


def wide_state_input() -> dict:
    """bench's ``wide_state_25x300`` input: one message, a 5 × 5 nested dict of 25-item lists."""
    inner = ["hi?" * 10, True, 1, 6327816386138, None] * 5
    return {"messages": [{str(a) * 10: {str(b) * 10: list(inner) for b in range(5)} for a in range(5)}]}


def sequential(saver: Any, n: int) -> Any:
    """``MessagesState`` through ``n`` no-op nodes in a row."""
    from langgraph.graph import END, START, MessagesState, StateGraph

    def noop(state: MessagesState) -> None:
        return None

    builder = StateGraph(MessagesState)
    names = [f"node_{i}" for i in range(n)]
    for name in names:
        builder.add_node(name, noop)
    for a, b in zip([START, *names], [*names, END]):
        builder.add_edge(a, b)
    return builder.compile(checkpointer=saver)


class Overall(TypedDict):
    subjects: list
    jokes: Annotated[list[str], operator.add]


class JokeIn(TypedDict):
    subject: Any


class JokeOut(TypedDict):
    jokes: list[str]


class Joke(JokeIn, JokeOut):
    pass


def fanout_to_subgraph(saver: Any) -> Any:
    """A ``Send`` per subject to a compiled subgraph: ``edit`` (the subject gets a suffix),
    ``generate`` (a joke), then ``bump`` appending " a" until there are ten."""
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Send

    def edit(state: JokeIn) -> dict:
        return {"subject": f"{state['subject']} - hohoho"}

    def generate(state: JokeIn) -> dict:
        return {"jokes": [f"Joke about {state['subject']}"]}

    def bump(state: JokeOut) -> dict:
        return {"jokes": [state["jokes"][0] + " a"]}

    def bumped_enough(state: JokeOut) -> str:
        return END if state["jokes"][0].endswith(" a" * 10) else "bump"

    sub = StateGraph(Joke, input_schema=JokeIn, output_schema=JokeOut)
    for step in (edit, generate, bump):
        sub.add_node(step.__name__, step)
    for a, b in ((START, "edit"), ("edit", "generate"), ("generate", "bump"), ("generate", END)):
        sub.add_edge(a, b)
    sub.add_conditional_edges("bump", bumped_enough)

    parent = StateGraph(Overall)
    parent.add_node("generate_joke", sub.compile())
    parent.add_conditional_edges(START, lambda s: [Send("generate_joke", {"subject": x}) for x in s["subjects"]])
    parent.add_edge("generate_joke", END)
    return parent.compile(checkpointer=saver)


def fanout_input(sends: int) -> dict:
    rng = random.Random(sends)
    return {"subjects": [rng.choices(LETTERS, k=1000) for _ in range(sends)]}


@dataclass(frozen=True)
class Graph:
    name: str
    label: str
    build: Callable[[Any], Any]  # saver → the compiled graph
    input: Callable[[], dict]


def _hi() -> dict:
    return {"messages": [("user", "hi?")]}


def graphs(quick: bool) -> list[Graph]:
    """The five graphs of issue 43 (``quick``: the same shapes, small)."""
    calls = (2, 3) if quick else (10, 100)
    wide, nodes, sends = (20, 10, 3) if quick else (300, 100, 10)
    return [
        *(Graph(f"react_agent_{c}", f"react_agent, {c} tool calls", lambda s, c=c: react_agent(s, c), _hi) for c in calls),
        Graph(f"wide_state_{wide}", f"wide_state({wide})", lambda s: wide_state(s, wide), wide_state_input),
        Graph(f"sequential_{nodes}", f"sequential, {nodes} no-op nodes", lambda s: sequential(s, nodes),
              lambda: {"messages": []}),
        Graph(f"fanout_to_subgraph_{sends}", f"fanout_to_subgraph, {sends} Sends", fanout_to_subgraph,
              lambda: fanout_input(sends)),
    ]


# --- running and checking ---------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """``value`` as plain data, without the message ids LangGraph draws at random (``add_messages``)."""
    if hasattr(value, "model_dump"):
        value = {k: v for k, v in value.model_dump().items() if k != "id"}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@dataclass
class Run:
    cpu: float  # s of CPU of this process
    wall: float  # s
    server: float  # s of CPU of the Postgres backend (0 on SQLite)


@dataclass
class Seat:
    """One saver of one graph: its database, the saver, the compiled graph, its runs."""

    target: PC.Target
    saver: Any
    graph: Any
    server: Callable[[], int] | None
    runs: list[Run] = field(default_factory=list)
    output: Any = None  # the first run's output, plain
    checkpoints: int = 0
    bytes: int = 0
    breakdown: dict[str, int] = field(default_factory=dict)
    empty: int = 0  # bytes of the database as setup() left it
    empty_breakdown: dict[str, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return PC._label(self.target.key)


def _config(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}, "recursion_limit": RECURSION}


def record(name: str, threads: list[int]) -> dict[int, PC.Calls]:
    """The saver calls of one ``invoke`` of graph ``name`` (full size) per thread, as ``per_call.record``
    gives a chat's: the input of ``instructions.py --graph`` and ``breakdown.py --graph``."""
    found = {g.name: g for g in graphs(False)}
    if name not in found:
        raise SystemExit(f"no graph {name!r}; one of {', '.join(found)}")
    graph = found[name]
    return PC.recorded_calls(threads, graph.build, lambda g, t: g.invoke(graph.input(), _config(f"graph-{t}")))


def run_once(seat: Seat, graph: Graph, thread: str) -> tuple[Run, Any]:
    """One ``invoke`` on a new thread, timed; its output checked against what the saver reads back."""
    config, given = _config(thread), graph.input()
    gc.collect()
    s0 = seat.server() if seat.server else 0
    c0, w0 = time.process_time(), time.perf_counter()
    out = seat.graph.invoke(given, config)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    server = (seat.server() - s0) / 1e9 if seat.server else 0.0
    stored = seat.graph.get_state(config).values
    if stored != out:
        raise SystemExit(f"{seat.name}, {graph.name}: the state read back is not what invoke returned")
    return Run(cpu, wall, server), _plain(out)


def measure(graph: Graph, runs: int, tmp: str, postgres: bool) -> list[Seat]:
    """Every saver of ``graph``, all open at once on fresh databases: a warm-up run each, then
    ``runs`` runs each, the savers' order rotating from run to run; then the checks and bytes."""
    targets = PC.fresh_targets(tmp, f"lg_{graph.name}", postgres)
    try:
        with ExitStack() as stack:
            seats = []
            for t in targets:
                saver = stack.enter_context(t.open())
                seat = Seat(t, saver, graph.build(saver), PC.server_clock(saver))
                seat.empty, seat.empty_breakdown = PC.bytes_on_disk(t, saver), breakdown(seat)
                seats.append(seat)
            for seat in seats:
                _, seat.output = run_once(seat, graph, "warm-up")
            for i in range(runs):
                for seat in PC.rotated(seats, i):
                    run, out = run_once(seat, graph, f"run-{i}")
                    if out != seat.output:
                        raise SystemExit(f"{seat.name}, {graph.name}: run {i} returned another state than the first")
                    seat.runs.append(run)
            for seat in seats:
                check(seat, seats[0], graph, f"run-{runs - 1}" if runs else "warm-up")
                seat.bytes = PC.bytes_on_disk(seat.target, seat.saver)
                seat.breakdown = breakdown(seat)
    finally:
        PC.drop_schemas([t.schema for t in targets if t.schema])
        for t in targets:
            for suffix in ("", "-wal", "-shm"):
                if t.backend == "sqlite" and os.path.exists(t.where + suffix):
                    os.unlink(t.where + suffix)
    return seats


def check(seat: Seat, first: Seat, graph: Graph, thread: str) -> None:
    """The same output and the same number of checkpoints (every namespace) as the first saver's."""
    seat.checkpoints = sum(1 for _ in seat.saver.list({"configurable": {"thread_id": thread}}))
    if seat.output != first.output:
        raise SystemExit(f"{graph.name}: {seat.name} returned another state than {first.name}")
    if seat.checkpoints != first.checkpoints:
        raise SystemExit(f"{graph.name}: {seat.name} lists {seat.checkpoints} checkpoints of a run, "
                         f"{first.name} {first.checkpoints}")


def breakdown(seat: Seat) -> dict[str, int]:
    """Bytes by table and index: SQLite ``dbstat`` (after the checkpoint of the WAL), Postgres
    ``pg_relation_size`` of every table, its TOAST (with its index) and its indexes."""
    if seat.target.backend == "sqlite":
        seat.saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        rows = seat.saver.conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
        free = seat.saver.conn.execute("PRAGMA freelist_count").fetchone()[0] * seat.saver.conn.execute(
            "PRAGMA page_size").fetchone()[0]
        return dict(sorted({**dict(rows), "(free pages)": free}.items(), key=lambda kv: -kv[1]))
    import psycopg

    sql = """
        SELECT c.relname, pg_relation_size(c.oid), COALESCE(pg_total_relation_size(NULLIF(c.reltoastrelid, 0)), 0),
               (SELECT COALESCE(json_object_agg(i.relname, pg_relation_size(i.oid)), '{}')
                  FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = c.oid)
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = %s AND c.relkind = 'r'"""
    out: dict[str, int] = {}
    with psycopg.connect(CF.PG_DSN, autocommit=True) as conn:
        for table, heap, toast, indexes in conn.execute(sql, (seat.target.schema,)):
            out[table] = heap
            if toast:
                out[f"{table} (TOAST)"] = toast
            out.update({f"{table}: {name}": size for name, size in indexes.items()})
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


# --- the report ---------------------------------------------------------------------------------------------


FIGURES = {  # figure → (label, the s of a run it reads; None: bytes)
    "cpu": ("CPU ms per run (this process)", lambda r: r.cpu),
    "server": ("Postgres server CPU ms per run", lambda r: r.server),
    "both": ("client + server CPU ms per run", lambda r: r.cpu + r.server),
    "wall": ("wall ms per run", lambda r: r.wall),
}
TARGETED = ("cpu", "wall", "bytes")  # the figures issue 43's target 2 names
TITLES = {"sqlite": "SQLite", "postgres": "Postgres"}
SHORT = {("sqlite", "cpu"): "CPU", ("postgres", "cpu"): "client CPU", ("postgres", "both"): "client + server CPU"}


def _pair(seats: list[Seat], backend: str) -> tuple[Seat, Seat] | None:
    found = {s.target.official: s for s in seats if s.target.backend == backend}
    return (found[True], found[False]) if len(found) == 2 else None


def ratios(official: Seat, ours: Seat, figure: str) -> list[float]:
    """threadline ÷ official, run by run (runs of the same round), or of the bytes."""
    if figure == "bytes":
        return [ours.bytes / official.bytes]
    pick = FIGURES[figure][1]
    return [pick(t) / pick(o) for o, t in zip(official.runs, ours.runs) if pick(o)]


def _x(ratio: float) -> str:
    """Two decimals; three where two would hide a miss or a win (0.995–1.005) or show 0.0x."""
    if 0.995 <= ratio < 1.005 and ratio != 1:
        return f"{ratio:.3f}"
    return f"{ratio:.2f}" if ratio >= 0.1 else f"{ratio:.3f}" if ratio >= 0.001 else f"{ratio:.1e}"


def _mark(xs: list[float]) -> str:
    """The median ratio, its spread, and whether it meets the target (≤ 1.00×)."""
    med = statistics.median(xs)
    spread = f" [{_x(min(xs))}–{_x(max(xs))}]" if len(xs) > 1 else ""
    return f"{_x(med)}×{spread} {'✓' if med <= 1.0 else '**✗**'}"


def _grown(seat: Seat) -> str:
    """The relations that grew during the runs, largest first, then the rest as setup() left them."""
    grown = {k: v for k, v in seat.breakdown.items() if v > seat.empty_breakdown.get(k, 0)}
    rest = sum(v for k, v in seat.breakdown.items() if k not in grown)
    parts = [f"{k} {fmt_bytes(v)}" for k, v in grown.items()]
    return ", ".join(parts + [f"{len(seat.breakdown) - len(grown)} more as created {fmt_bytes(rest)}"])


def _ms(seat: Seat, figure: str) -> str:
    xs = [FIGURES[figure][1](r) * 1000 for r in seat.runs]
    return PC._spread(xs, "{:,.1f}") if xs else "—"


def render(results: dict[str, list[Seat]], labels: dict[str, str], args: argparse.Namespace, header: str | None = None) -> str:
    backends = [b for b in ("sqlite", "postgres") if any(_pair(s, b) for s in results.values())]
    command = f"benchmarks/lg_graphs.py --runs {args.runs}{' --quick' if args.quick else ''}" + (
        f" --graphs {args.graphs}" if args.graphs else "") + ("" if "postgres" in backends else " --no-postgres")
    load = (f"\n- load average (1 / 5 / 15 min) at the start: {' / '.join(f'{x:.2f}' for x in args.load[0])}; at the end: "
            f"{' / '.join(f'{x:.2f}' for x in args.load[1])}; (1 min) after each graph: "
            + ", ".join(f"{name} {x:.2f}" for name, x in args.loads.items()) if header is None else "")
    lines = [(header if header is not None else machine()) + load, "",
             (f"Command: `{command}`. LangGraph's benchmark graphs (`libs/langgraph/bench`, rewritten: "
             "`benchmarks/lg_graphs.py`) compiled with each durable saver, `graph.invoke` on a new thread per run, "
             "LangGraph's default durability; per graph every saver open at once on fresh databases, one warm-up run "
             f"each, then {args.runs} runs each, the savers' order rotating run by run. ms per run: median [min–max]; "
             "CPU: `time.process_time` of the whole process (LangGraph's background writer thread makes the puts); "
             "ratio: threadline ÷ official, the median [min–max] of the run-by-run ratios; bytes: the database after "
             f"the {args.runs + 1} threads. ✓: within issue 43's target 2 (≤ 1.00×); **✗**: not."), ""]
    # the summary, as issue 43's table
    summary = {b: (*TARGETED[:1], "both", *TARGETED[1:]) if b == "postgres" else TARGETED for b in backends}
    head = ["graph"] + [f"{TITLES[b]} {SHORT.get((b, f), f)}" for b in backends for f in summary[b]]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, seats in results.items():
        cells = [labels[name]]
        for b in backends:
            pair = _pair(seats, b)
            cells += [_mark(ratios(*pair, f)).replace(" [", "<br>[") if pair else "—" for f in summary[b]]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for b in backends:
        pg = b == "postgres"
        lines += [f"### {CF.NAMES[b, False]}: the figures", "",
                  "| graph | figure | official | threadline | threadline ÷ official |", "|---|---|---|---|---|"]
        for name, seats in results.items():
            pair = _pair(seats, b)
            if not pair:
                continue
            off, ours = pair
            for figure in ("cpu", "server", "both", "wall") if pg else ("cpu", "wall"):
                lines.append(f"| {labels[name]} | {FIGURES[figure][0]} | {_ms(off, figure)} | {_ms(ours, figure)} | "
                             f"{_mark(ratios(off, ours, figure))} |")
            lines.append(f"| {labels[name]} | bytes on disk (of which the empty schema) | {fmt_bytes(off.bytes)} "
                         f"({fmt_bytes(off.empty)}) | {fmt_bytes(ours.bytes)} ({fmt_bytes(ours.empty)}) | "
                         f"{_mark(ratios(off, ours, 'bytes'))} |")
            grew = [(seat.bytes - seat.empty) / (args.runs + 1) for seat in pair]
            if grew[0] > 0:
                lines.append(f"| {labels[name]} | bytes a run adds (the growth ÷ {args.runs + 1} threads) | "
                             f"{fmt_bytes(grew[0])} | {fmt_bytes(grew[1])} | {_x(grew[1] / grew[0])}× |")
            lines.append(f"| {labels[name]} | checkpoints of a run (every namespace) | {off.checkpoints} | {ours.checkpoints} | |")
        lines.append("")
    if args.breakdown:
        lines += ["### Bytes by table and index", "",
                  ("SQLite: `dbstat` (the pages of each table and index) and the free pages; Postgres: "
                  "`pg_relation_size` of each table (heap), its TOAST (with the TOAST index) and each index "
                  "(`table: index`). The relations that grew during the runs, largest first, then the others, "
                  "as `setup()` created them."), ""]
        for name, seats in results.items():
            for seat in seats:
                lines.append(f"- {labels[name]}, {seat.name} ({fmt_bytes(seat.bytes)}): {_grown(seat)}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=None, help="timed runs per saver and graph (default 5; --quick 1)")
    ap.add_argument("--graphs", default="", help="comma-separated names (default: all five)")
    ap.add_argument("--quick", action="store_true", help="small graphs, one run: for the smoke test")
    ap.add_argument("--breakdown", action=argparse.BooleanOptionalAction, default=True,
                    help="bytes by table and index in the report (default: on)")
    ap.add_argument("--postgres", action=argparse.BooleanOptionalAction, default=None,
                    help="the Postgres savers too (default: when the server answers)")
    ap.add_argument("--write-results", action="store_true", help="rewrite the lg-graphs section of RESULTS.md")
    args = ap.parse_args(argv)
    args.runs = args.runs if args.runs is not None else 1 if args.quick else 5
    chosen = [g for g in graphs(args.quick) if not args.graphs or g.name in args.graphs.split(",")]
    if not chosen or args.runs < 1:
        ap.error(f"--graphs: none of {[g.name for g in graphs(args.quick)]}" if not chosen else "--runs must be at least 1")
    reason = CF.postgres_reason() if args.postgres is not False else "--no-postgres"
    if reason and args.postgres:
        ap.error(f"--postgres: the server does not answer ({reason})")
    if args.postgres is None and reason:
        print(f"Postgres skipped: {reason}", file=sys.stderr)
    t0, load0, args.loads = time.perf_counter(), os.getloadavg(), {}
    results = {}
    with tempfile.TemporaryDirectory(prefix="threadline-lg-graphs-") as tmp:
        for graph in chosen:
            t1 = time.perf_counter()
            results[graph.name] = measure(graph, args.runs, tmp, reason is None)
            args.loads[graph.name] = os.getloadavg()[0]
            print(f"  {graph.name}: {time.perf_counter() - t1:.0f} s, load {args.loads[graph.name]:.2f}", file=sys.stderr)
    args.load = load0, os.getloadavg()
    md = render(results, {g.name: g.label for g in chosen}, args)
    if args.write_results:
        write_results(md, START, END)
    print(md)
    print(f"lg graphs: {time.perf_counter() - t0:.0f} s{' (RESULTS.md rewritten)' if args.write_results else ''}",
          file=sys.stderr)
    return md


if __name__ == "__main__":
    main()
