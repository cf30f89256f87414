"""Where one kind of saver call spends its instructions: the part inside given functions or SQL
statements, counted by valgrind's callgrind beside the whole call (issue 43: what to cut next).

Usage::

    .venv/bin/python benchmarks/breakdown.py put [--threads 3] [--jobs 2] [--src DIR] [--calls FILE | --graph NAME] [--backend postgres] PART [PART ...]

A PART is one of:

* ``-``: the whole call (as ``instructions.py`` counts it);
* ``module:function`` or ``module:Class.method``, several joined by ``,``: the instructions inside
  them (a generator function counted at each resumption; a call nested in another counted once);
* ``sql:PREFIX``: the statements whose text starts with PREFIX, as ``sqlite3`` runs them (``sql:*``
  every statement; ``sql:COMMIT`` the commit).

Method: as ``instructions.py`` (its recorded conversations, one callgrind process per part, the first
conversation a warm-up), with callgrind's collection switched on only inside the wrapped functions or
statements during calls of that kind, on threadline's ``SqliteSaver`` (``--backend postgres``: its
``PostgresSaver``, a schema of its own at ``THREADLINE_TEST_POSTGRES``, the client's instructions). Switching the counting on and off
costs instructions of its own (the ``ctypes`` calls, ~2,000), counted each time a part is entered: a
calibration run counts a wrapped no-op, and that much is taken off each part per time it was entered
(shown). ``sql:*`` holds ``BEGIN`` and ``COMMIT``. Figures, never assertions.

Example (round twenty-one)::

    breakdown.py put - sql:* sql:COMMIT threadline.storage.ops.write:put threadline.codec.policy:make_ref
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import importlib
import inspect
import os
import pickle
import sqlite3
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
CALIBRATE = "calibrate"  # the part that counts a wrapped no-op only
sys.path.insert(0, str(HERE))
import instructions  # noqa: E402  (the recording and the toggle helper)


def _wrap(fn: Callable, toggle: Callable, state: dict) -> Callable:
    """``fn`` counted while a call of the kind runs (and not already inside a counted part)."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def gen(*args: Any, **kw: Any) -> Any:
            g, sent = fn(*args, **kw), None
            while True:
                counting = state["in"] and not state["depth"]
                if counting:
                    state["depth"] += 1
                    state["n"] += 1
                    toggle()
                try:
                    q = g.send(sent)
                except StopIteration as stop:
                    return stop.value
                finally:
                    if counting:
                        toggle()
                        state["depth"] -= 1
                sent = yield q
        return gen

    @functools.wraps(fn)
    def plain(*args: Any, **kw: Any) -> Any:
        if not state["in"] or state["depth"]:
            return fn(*args, **kw)
        state["depth"] += 1
        state["n"] += 1
        toggle()
        try:
            return fn(*args, **kw)
        finally:
            toggle()
            state["depth"] -= 1
    return plain


def _targets(spec: str) -> list[tuple[Any, str]]:
    """(owner, attribute name) of each ``module:function`` or ``module:Class.method`` of ``spec``;
    SystemExit naming one that is not there (checked before any callgrind run starts)."""
    found = []
    for target in spec.split(","):
        module, _, attr = target.partition(":")
        try:
            owner: Any = importlib.import_module(module)
            *path, name = attr.split(".")
            for part in path:
                owner = getattr(owner, part)
            if name not in vars(owner):
                raise AttributeError(f"{name!r} is not defined on {owner!r} itself (name the class that defines it)")
        except (ImportError, AttributeError, ValueError) as exc:
            raise SystemExit(f"breakdown: no part {target!r}: {exc}") from None
        found.append((owner, name))
    return found


def _patch_functions(spec: str, toggle: Callable, state: dict) -> None:
    for owner, name in _targets(spec):
        setattr(owner, name, _wrap(getattr(owner, name), toggle, state))


def _patch_sql(prefix: str, toggle: Callable, state: dict) -> None:
    def run(sql: str, fn: Callable, *args: Any) -> Any:
        """``fn(*args)``, counted when ``sql`` is a statement of the part during a call of the kind."""
        on = state["in"] and (prefix == "*" or sql.lstrip().upper().startswith(prefix.upper()))
        state["n"] += on
        toggle() if on else None
        try:
            return fn(*args)
        finally:
            toggle() if on else None

    class Cursor(sqlite3.Cursor):
        def execute(self, sql: str, params: Any = ()) -> Any:  # type: ignore[override]
            return run(sql, super().execute, sql, params)

        def executemany(self, sql: str, params: Any) -> Any:  # type: ignore[override]
            return run(sql, super().executemany, sql, params)

    class Connection(sqlite3.Connection):
        def cursor(self, factory: Any = Cursor) -> Any:  # type: ignore[override]
            return super().cursor(factory)

        def execute(self, sql: str, params: Any = ()) -> Any:  # type: ignore[override]
            return self.cursor().execute(sql, params)

        def commit(self) -> None:
            run("COMMIT", super().commit)

    connect = sqlite3.connect
    sqlite3.connect = lambda *a, **kw: connect(*a, factory=Connection, **kw)  # type: ignore[assignment]


def child(kind: str, part: str, calls_file: str, lib: str, threads: int, where: str) -> None:
    toggle = ctypes.CDLL(lib).toggle
    state = {"in": False, "depth": 0, "n": 0}
    noop = _wrap(lambda: None, toggle, state)
    if part.startswith("sql:"):
        _patch_sql(part[4:], toggle, state)
    elif part not in ("-", CALIBRATE):
        _patch_functions(part, toggle, state)
    saver_class = instructions._saver_class("threadline", "postgres" if where.startswith("postgres") else "sqlite")
    calls = pickle.loads(Path(calls_file).read_bytes())
    counted = 0
    with saver_class.from_conn_string(where) as saver:
        saver.setup()
        names = sorted(calls)[: threads + 1]
        for thread in names:
            wrote = False
            for name, blob in calls[thread]:
                args = pickle.loads(blob)
                this = name if name != "get_tuple" else "get_warm" if wrote else "get_new"
                if this == kind and thread != names[0]:
                    state["in"] = True
                    toggle() if part == "-" else None
                    if part == CALIBRATE:  # the counting's own cost: a wrapped no-op, ten times a call
                        for _ in range(10):
                            noop()
                    getattr(saver, name)(*args)
                    toggle() if part == "-" else None
                    state["in"] = False
                    counted += 1
                else:
                    getattr(saver, name)(*args)
                wrote = wrote or name == "put"
        if kind == "get_cold":  # a new saver's reads of each conversation's latest checkpoint (as instructions.py's)
            counted = instructions.cold_reads(saver_class, where, [instructions._thread_of(calls[t]) for t in names[1:]],
                                              _cold_toggle(toggle, state, part))
    print(f"counted {counted} {state['n']}", file=sys.stderr)


def _cold_toggle(toggle: Callable, state: dict, part: str) -> Callable:
    """What ``instructions.cold_reads`` calls around each counted read: the part is in a call of the
    kind in between (and the whole call counted when the part is ``-``), the calibration's no-ops run."""
    noop = _wrap(lambda: None, toggle, state)

    def around() -> None:
        state["in"] = not state["in"]
        if part == "-":
            toggle()
        elif part == CALIBRATE and state["in"]:
            for _ in range(10):
                noop()
    return around


def measure(kind: str, part: str, src: str, calls_file: str, lib: str, tmp: str, threads: int, backend: str) -> tuple[float, float]:
    """(instructions, times ``part`` was entered) per call of ``kind``, from one callgrind run on a
    fresh database (a SQLite file, or a Postgres schema of its own: ``per_call.fresh_targets``)."""
    import per_call

    out = os.path.join(tmp, f"{abs(hash(part))}.callgrind")
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": src}
    schema = None
    if backend == "postgres":
        made = [t for t in per_call.fresh_targets(tmp, abs(hash(part)) % 10**6, True) if t.backend == "postgres"]
        target = next(t for t in made if not t.official)
        per_call.drop_schemas([t.schema for t in made if t is not target])
        where, schema = target.where, target.schema
    else:
        where = os.path.join(tmp, f"{abs(hash(part))}.db")
    try:
        run = subprocess.run(
            ["valgrind", "--tool=callgrind", "--collect-atstart=no", f"--callgrind-out-file={out}",
             sys.executable, __file__, "--child", kind, part, calls_file, lib, str(threads), where],
            env=env, capture_output=True, text=True, check=True,
        )
    finally:
        if schema:
            per_call.drop_schemas([schema])
    calls, entered = map(int, next(line.split()[1:3] for line in run.stderr.splitlines() if line.startswith("counted ")))
    total = next(int(line.split()[1]) for line in Path(out).read_text().splitlines() if line.startswith(("summary:", "totals:")))
    return total / calls, entered / calls


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=instructions.KINDS)
    parser.add_argument("parts", nargs="+")
    parser.add_argument("--threads", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--src", default=str(HERE.parent / "src"), help="the threadline source tree to measure")
    parser.add_argument("--calls", help="recorded calls to replay instead of the chat's (as instructions.py's --calls)")
    parser.add_argument("--graph", help="record runs of this graph of lg_graphs.py instead of the chat (as instructions.py's --graph)")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite",
                        help="postgres: the client's instructions, at THREADLINE_TEST_POSTGRES (as instructions.py's)")
    args = parser.parse_args(argv)
    sys.path.insert(0, args.src)
    for part in args.parts:
        if not part.startswith("sql:") and part not in ("-", CALIBRATE):
            _targets(part)
    with tempfile.TemporaryDirectory() as tmp:
        lib = os.path.join(tmp, "toggle.so")
        Path(tmp, "toggle.c").write_text(instructions.TOGGLE_C)
        subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", lib, os.path.join(tmp, "toggle.c")], check=True)
        calls_file = os.path.join(tmp, "calls.pkl")
        Path(calls_file).write_bytes(instructions.recorded(args))
        with ThreadPoolExecutor(args.jobs) as pool:
            found = list(pool.map(lambda p: measure(args.kind, p, args.src, calls_file, lib, tmp, args.threads, args.backend), [CALIBRATE, *args.parts]))
    (noop, tens), found = found[0], found[1:]
    each = noop / tens  # the counting's own instructions each time a part is entered
    lines = [f"Instructions per `{args.kind}` (callgrind), {instructions._source(args)} after a warm-up one, "
             f"threadline's {'PostgresSaver (client)' if args.backend == 'postgres' else 'SqliteSaver'} from `{args.src}`; the counting's own {each:,.0f} instructions each time a part "
             "is entered taken off (a part entered once per call: `-`).", "",
             "| part | instructions per call | entered per call |", "|---|---|---|"]
    lines += [f"| `{p}` | {n - (entered * each if p != '-' else 0):,.0f} | {entered:.2f} |" for p, (n, entered) in zip(args.parts, found)]
    report = "\n".join(lines)
    print(report)
    return report


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]), sys.argv[7])
    else:
        main()
