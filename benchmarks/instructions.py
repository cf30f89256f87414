"""Instructions per saver call, threadline beside the official SQLite saver (issue 43, target 1),
counted by valgrind's callgrind: a figure that repeats to within 0.1 % from run to run, where CPU
time on a shared virtual machine moves by tens of per cent between two runs of the same script.

Usage::

    .venv/bin/python benchmarks/instructions.py [--threads 5] [--kinds put,put_writes,get_warm,get_new,get_cold]
        [--src DIR] [--jobs 2] [--calls FILE | --graph NAME] [--backend sqlite|postgres]

Method: ``per_call.record`` runs ``--threads`` + 1 conversations of 4 turns of the chat fleet's
``create_react_agent`` once and keeps every ``put`` / ``put_writes`` / ``get_tuple`` call. Then, for
each call kind and each saver, one process under ``valgrind --tool=callgrind --collect-atstart=no``
replays every conversation on a fresh SQLite file (the first conversation as a warm-up), and a small C
helper built here (``CALLGRIND_TOGGLE_COLLECT``) switches counting on around each call of that kind
only: the count is the instructions of those calls (the saver, its driver, SQLite, LangGraph's
serializer), nothing else of the process. ``get_warm`` is a ``get_tuple`` of a thread the saver has
written (a turn's first read, after its own puts), ``get_new`` one of a thread with nothing stored,
``get_cold`` one of each conversation's latest checkpoint by a new saver on the file they were written
to (after another new saver read them all uncounted: the process's one-off work is not counted).
``--src``: a threadline source tree to measure instead of this checkout's (a before/after pair).
``--calls``: another recording to replay (a pickle of thread → [(method, pickled arguments), …], as
``per_call.record`` returns); ``--graph NAME``: runs of one of ``lg_graphs.py``'s graphs recorded now
instead of the chat (``sequential_100``: a wide checkpoint of small values, a hundred channels).
``--backend postgres``: the Postgres savers, each on a schema of its own at ``THREADLINE_TEST_POSTGRES``;
the count is the client process's (the server's work is another process's, not counted).

Instructions are not time: a cache miss or a page fault costs many. They settle whether a change
makes a call do less work. Needs valgrind and gcc with valgrind's headers (Debian: ``valgrind``);
about a minute a kind and saver. Figures, never assertions.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import pickle
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
KINDS = ("put", "put_writes", "get_warm", "get_new", "get_cold")
TOGGLE_C = "#include <valgrind/callgrind.h>\nvoid toggle(void) { CALLGRIND_TOGGLE_COLLECT; }\n"


def _saver_class(saver_name: str, backend: str) -> type:
    if backend == "postgres":
        if saver_name == "official":
            from langgraph.checkpoint.postgres import PostgresSaver
        else:
            from threadline import PostgresSaver
        return PostgresSaver
    if saver_name == "official":
        from langgraph.checkpoint.sqlite import SqliteSaver
    else:
        from threadline import SqliteSaver
    return SqliteSaver


def recorded(args: argparse.Namespace) -> bytes:
    """The pickled calls to replay: ``--calls``' file, else ``--threads`` + 1 runs of ``--graph`` or chat
    conversations recorded now."""
    import per_call

    if args.calls:
        return Path(args.calls).read_bytes()
    threads = list(range(args.threads + 1))
    if args.graph:
        import lg_graphs

        return pickle.dumps(lg_graphs.record(args.graph, threads))
    return pickle.dumps(per_call.record(threads, 4))


def _source(args: argparse.Namespace) -> str:
    """What was replayed, for a report's first line."""
    if args.calls:
        return f"the calls of {args.calls}"
    return f"{args.threads} runs of {args.graph}" if args.graph else f"{args.threads} conversations of 4 turns"


def child(kind: str, saver_name: str, calls_file: str, lib: str, where: str) -> None:
    """Replay every conversation, counting only the calls of ``kind`` (callgrind's collection toggled),
    on the SQLite file or Postgres DSN ``where``."""
    toggle = ctypes.CDLL(lib).toggle
    calls = pickle.loads(Path(calls_file).read_bytes())
    saver_class = _saver_class(saver_name, "postgres" if where.startswith("postgres") else "sqlite")
    counted = 0
    with saver_class.from_conn_string(where) as saver:
        saver.setup()
        threads = sorted(calls)
        for thread in threads:
            wrote = False
            for name, blob in calls[thread]:
                args = pickle.loads(blob)
                call = getattr(saver, name)
                this = name if name != "get_tuple" else "get_warm" if wrote else "get_new"
                if this == kind and thread != threads[0]:
                    toggle()
                    call(*args)
                    toggle()
                    counted += 1
                else:
                    call(*args)
                wrote = wrote or name == "put"
        if kind == "get_cold":
            counted = cold_reads(saver_class, where, [_thread_of(calls[t]) for t in threads[1:]], toggle)
    print(f"counted {counted}", file=sys.stderr)


def _thread_of(conversation: list) -> str:
    return pickle.loads(conversation[0][1])[0]["configurable"]["thread_id"]


def cold_reads(saver_class: type, path: str, thread_ids: list[str], toggle: object) -> int:
    """Count a new saver's read of each thread's latest checkpoint, after another new saver read them all
    uncounted: the process's one-off work (imports, statement preparation, schemas built on first use)
    is done, the counted saver's cache is empty."""
    for counted in (False, True):
        with saver_class.from_conn_string(path) as saver:
            for thread_id in thread_ids:
                config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
                if counted:
                    toggle()  # type: ignore[operator]
                found = saver.get_tuple(config)
                if counted:
                    toggle()  # type: ignore[operator]
                assert found is not None
    return len(thread_ids)


def measure(kind: str, saver_name: str, src: str, calls_file: str, lib: str, tmp: str, backend: str = "sqlite") -> tuple[int, int]:
    """(instructions, calls) of ``kind`` on one saver, from one callgrind run on a fresh database (a
    SQLite file, or a Postgres schema of its own: ``per_call.fresh_targets``)."""
    import per_call

    out = os.path.join(tmp, f"{kind}-{saver_name}.callgrind")
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": src}
    if backend == "postgres":
        made = [t for t in per_call.fresh_targets(tmp, 2 * KINDS.index(kind) + (saver_name == "official"), True) if t.backend == "postgres"]
        target = next(t for t in made if t.official == (saver_name == "official"))
        per_call.drop_schemas([t.schema for t in made if t is not target])
    else:
        target = per_call.Target("sqlite", saver_name == "official", os.path.join(tmp, f"{kind}-{saver_name}.db"))
    try:
        run = subprocess.run(
            ["valgrind", "--tool=callgrind", "--collect-atstart=no", f"--callgrind-out-file={out}",
             sys.executable, __file__, "--child", kind, saver_name, calls_file, lib, target.where],
            env=env, capture_output=True, text=True, check=True,
        )
    finally:
        if target.schema:
            per_call.drop_schemas([target.schema])
    calls = int(next(line.split()[1] for line in run.stderr.splitlines() if line.startswith("counted ")))
    total = next(int(line.split()[1]) for line in Path(out).read_text().splitlines() if line.startswith(("summary:", "totals:")))
    return total, calls


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=5)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--src", default=str(HERE.parent / "src"), help="the threadline source tree to measure")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--calls", help="recorded calls to replay instead of the chat's (a pickle shaped as per_call.record's)")
    parser.add_argument("--graph", help="record runs of this graph of lg_graphs.py (e.g. sequential_100) instead of the chat")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite",
                        help="postgres: the client's instructions (the server's are another process), at THREADLINE_TEST_POSTGRES")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return ""
    sys.path.insert(0, str(HERE))
    kinds = [k for k in args.kinds.split(",") if k]
    with tempfile.TemporaryDirectory() as tmp:
        lib = os.path.join(tmp, "toggle.so")
        Path(tmp, "toggle.c").write_text(TOGGLE_C)
        subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", lib, os.path.join(tmp, "toggle.c")], check=True)
        calls_file = os.path.join(tmp, "calls.pkl")
        Path(calls_file).write_bytes(recorded(args))
        jobs = [(kind, saver) for kind in kinds for saver in ("threadline", "official")]
        with ThreadPoolExecutor(args.jobs) as pool:
            found = dict(zip(jobs, pool.map(lambda j: measure(*j, args.src, calls_file, lib, tmp, args.backend), jobs)))
    saver = "PostgresSaver (client)" if args.backend == "postgres" else "SqliteSaver"
    lines = [
        f"Instructions per call (callgrind), {_source(args)} "
        "replayed after a warm-up one; "
        f"threadline from `{args.src}`.", "",
        f"| call | official {saver} | threadline {saver} | threadline ÷ official | calls counted |", "|---|---|---|---|---|",
    ]
    for kind in kinds:
        (ours, n), (theirs, _) = found[(kind, "threadline")], found[(kind, "official")]
        if not n:  # the recording makes no such call (a graph run reads its thread once, before writing)
            lines.append(f"| {kind} | — | — | — | 0 |")
            continue
        lines.append(f"| {kind} | {theirs / n:,.0f} | {ours / n:,.0f} | {ours / theirs:.2f}× | {n} |")
    report = "\n".join(lines)
    print(report)
    return report


if __name__ == "__main__":
    main()
