"""How long the ``threadline`` command and ``from threadline import SqliteSaver`` take to start,
each a fresh process, beside the official saver's import (issue 44's targets: ``--help`` and
``--version`` ≤ 0.3 s, ``threads --db demo.db`` ≤ 0.6 s, the import no slower than the
official's; medians on a quiet machine). Also, beside the official's, the import followed by a
saver opened (``from_conn_string(":memory:")`` and ``setup()``): a saver loads its engine
when constructed, not when imported, so this is the figure of a program that uses the saver; and
the import after LangGraph's (``import langgraph.checkpoint.base`` first, as an application that
builds its graph first has it).

Usage::

    .venv/bin/python benchmarks/startup.py [--rounds 15] [--write-results]

Writes the demo database once (``threadline demo``), then runs every case once per round, in
turn, every other round in reverse order (a warm-up round first, not counted), so a drift of the
machine's speed and a case's place in the round touch every case alike; the ratios to the official saver's (the import; the import and a saver opened) are taken
round by round. Wall and CPU (user + sys) seconds of each finished process, and the load average
at the start and the end (the figures hold on a quiet machine only). ``--write-results`` rewrites the ``<!-- startup:start -->``
section of ``RESULTS.md``. Figures, never assertions.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run_report import machine, write_results  # noqa: E402

BIN = Path(sys.executable).parent
EXE = str(BIN / "threadline")
START, END = "<!-- startup:start -->", "<!-- startup:end -->"
OFFICIAL_IMPORT = "from langgraph.checkpoint.sqlite import SqliteSaver"
OPEN = "\nwith SqliteSaver.from_conn_string(':memory:') as saver:\n    saver.setup()"
IMPORT, OPENED = "from threadline import SqliteSaver", "from threadline import SqliteSaver; a saver opened"
OFFICIAL_OPENED = f"{OFFICIAL_IMPORT}; a saver opened (official)"
# as an application imports a saver: LangGraph loaded first (its graph classes), then the saver
LANGGRAPH = "import langgraph.checkpoint.base; "
AFTER, OFFICIAL_AFTER = f"{IMPORT}, LangGraph imported first", f"{OFFICIAL_IMPORT}, LangGraph imported first (official)"


def cases(db: str) -> dict[str, tuple[list[str], float | None]]:
    """Name → (command, target seconds or None)."""
    return {
        "threadline --help": ([EXE, "--help"], 0.3),
        "threadline --version": ([EXE, "--version"], 0.3),
        "threadline threads --db demo.db": ([EXE, "threads", "--db", db], 0.6),
        IMPORT: ([sys.executable, "-c", "from threadline import SqliteSaver"], None),
        f"{OFFICIAL_IMPORT} (official)": ([sys.executable, "-c", OFFICIAL_IMPORT], None),
        OPENED: ([sys.executable, "-c", "from threadline import SqliteSaver" + OPEN], None),
        OFFICIAL_OPENED: ([sys.executable, "-c", OFFICIAL_IMPORT + OPEN], None),
        AFTER: ([sys.executable, "-c", LANGGRAPH + IMPORT], None),
        OFFICIAL_AFTER: ([sys.executable, "-c", LANGGRAPH + OFFICIAL_IMPORT], None),
    }


def timed(command: list[str], cwd: str) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of ``command``; its output is discarded."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=ENV)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


# Bytecode as an installed wheel has it (pip compiles site-packages, so LangGraph's is compiled):
# without this, PYTHONDONTWRITEBYTECODE in the environment would time threadline's compilation.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"COLUMNS": "120"}


def measure(rounds: int) -> tuple[dict[str, list[tuple[float, float]]], dict[str, float | None]]:
    import threadline

    compileall.compile_dir(Path(threadline.__file__).parent, quiet=1)
    with tempfile.TemporaryDirectory() as folder:
        db = os.path.join(folder, "demo.db")
        subprocess.run([EXE, "demo", "--db", db], cwd=folder, stdout=subprocess.DEVNULL, check=True)
        runs = cases(db)
        found: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
        for n in range(rounds + 1):
            # every other round in reverse order: a case's place in the round (what ran just before it)
            # moves its time by a few per cent on this machine, the same way every round
            for name, (command, _) in (list(runs.items()) if n % 2 else list(runs.items())[::-1]):
                figure = timed(command, folder)
                if n:  # round 0 warms the file cache
                    found[name].append(figure)
        return found, {name: target for name, (_, target) in runs.items()}


def report(found: dict[str, list[tuple[float, float]]], targets: dict[str, float | None], rounds: int,
           load: tuple[float, float]) -> str:
    lines = [
        f"{machine()}\n- load average (1 min) at the start / the end of the run: {load[0]:.1f} / {load[1]:.1f}\n",
        f"Each a fresh process, {rounds} rounds (every case once per round, in turn, every other round in "
        "reverse order, after a warm-up round); "
        "wall and CPU (user + sys) seconds.\n",
        "| command | median wall | min – max | median CPU | target |",
        "|---|---|---|---|---|",
    ]
    for name, figures in found.items():
        walls, cpus = [w for w, _ in figures], [c for _, c in figures]
        target = targets[name]
        lines.append(f"| `{name}` | {statistics.median(walls):.3f} s | {min(walls):.3f} – {max(walls):.3f} s | "
                     f"{statistics.median(cpus):.3f} s | {'≤ %.1f s' % target if target else ''} |")
    for ours, theirs, what, target in (
        (IMPORT, f"{OFFICIAL_IMPORT} (official)", "`from threadline import SqliteSaver` / the official import", " (target: ≤ 1.00×)"),
        (OPENED, OFFICIAL_OPENED, "The import and a saver opened / the official's", ""),
        (AFTER, OFFICIAL_AFTER, "The import with LangGraph imported first / the official's", ""),
    ):
        pairs = [a[0] / b[0] for a, b in zip(found[ours], found[theirs])]
        cpu_pairs = [a[1] / b[1] for a, b in zip(found[ours], found[theirs]) if b[1]]
        lines.append(f"\n{what}, round by round: median {statistics.median(pairs):.2f}× wall (min {min(pairs):.2f}, "
                     f"max {max(pairs):.2f}), {statistics.median(cpu_pairs):.2f}× CPU{target}.")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--write-results", action="store_true", help="rewrite the startup section of RESULTS.md")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    found, targets = measure(args.rounds)
    md = report(found, targets, args.rounds, (load, os.getloadavg()[0]))
    print(md)
    if args.write_results:
        write_results(md, START, END)


if __name__ == "__main__":
    main()
