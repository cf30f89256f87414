"""The report of ``run.py``: Markdown tables of its figures, the targets it checks, the
machine it ran on, and the generated sections of ``RESULTS.md`` it rewrites (``scale.py``,
``concurrency.py``, ``seed002.py`` and ``tune.py`` write theirs with ``write_results``)."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from importlib.metadata import version
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"
PG_DSN = os.environ.get("THREADLINE_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
LONG = 2000  # messages in the long thread's last checkpoint (``run.py --long``)
# The end-to-end runs: LangGraph durability "sync" and "async" on the sync savers (``invoke``), and
# the async savers under ``ainvoke`` (durability "async", LangGraph's default).
DURABILITY = ("sync", "async", "ainvoke")

if TYPE_CHECKING:
    from run import Figures



def fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def ratio(v: float | None, ref: float | None) -> str:
    if v is None or ref in (None, 0):
        return ""
    return f"{v / ref:.2f}×"


def tables(figs: list[Figures], at: list[int], threads: int, turns: int, long: int = LONG, long_turns: int = 0) -> str:
    lines = []
    for backend in ("memory", "sqlite", "postgres"):
        group = [f for f in figs if f.saver.backend == backend]
        if not group:
            continue
        ref = next((f for f in group if f.saver.official), None)
        title = {"memory": "In memory (floor, no I/O)", "sqlite": "SQLite", "postgres": "Postgres"}[backend]
        lines.append(f"### {title}\n")
        names = [f.saver.name for f in group]
        lines.append("| figure | " + " | ".join(names) + " |")
        lines.append("|---|" + "---|" * len(group))

        def row(label: str, get: Callable[[Figures], float | None], show: Callable[[float], str], with_ratio: bool = True) -> None:
            cells = []
            for f in group:
                v = get(f)
                cell = "—" if v is None else show(v)
                if with_ratio and ref is not None and f is not ref and v is not None:
                    cell += f" ({ratio(v, get(ref))})"
                cells.append(cell)
            lines.append(f"| {label} | " + " | ".join(cells) + " |")

        ms = lambda v: f"{v:.2f} ms"  # noqa: E731
        for step in at:
            row(f"put ms/superstep @{step}", lambda f, s=step: f.put.get(s), ms)
            row(f"put_writes ms/superstep @{step}", lambda f, s=step: f.writes.get(s), ms)
            row(f"**put+put_writes ms/superstep @{step}**", lambda f, s=step: f.both.get(s), ms)
            row(f"put+put_writes CPU ms/superstep @{step} (client + server)", lambda f, s=step: f.cpu.get(s), ms)
        row("get-latest ms (the saver that wrote)", lambda f: f.get_latest, ms)
        row("get-latest ms (nothing cached)", lambda f: f.get_latest_cold, ms)
        row(f"get-latest ms, {long} messages (the saver that wrote)", lambda f: f.long_get, ms)
        row(f"get-latest ms, {long} messages (nothing cached)", lambda f: f.long_get_cold, ms)
        row("list ms per checkpoint", lambda f: f.list_per_ck, ms)
        row("bytes on disk", lambda f: f.bytes, fmt_bytes)
        row("**amplification**", lambda f: f.amplification, lambda v: f"{v:.2f}", with_ratio=True)
        for durability in DURABILITY:
            row(f"end-to-end ReAct wall s ({threads}×{turns} turns, {_mode(durability)})", lambda f, d=durability: f.e2e_seconds.get(d), lambda v: f"{v:.2f} s")
        row("end-to-end ReAct bytes on disk", lambda f: f.e2e_bytes, fmt_bytes)
        row(f"end-to-end ReAct, one {long_turns}-turn conversation: CPU ms per turn, last 20 turns (this process)",
            lambda f: f.e2e_long_ms, ms)
        lines.append("")
    lines.append("Ratios in parentheses: the figure ÷ the official saver's on the same backend (< 1: faster or smaller).\n")
    return "\n".join(lines)


def targets(figs: list[Figures], last: int, long: int = LONG) -> str:
    by = {(f.saver.backend, f.saver.name): f for f in figs}
    lines = ["| target | measured | met |", "|---|---|---|"]

    def add(label: str, measured: str, ok: bool | None) -> None:
        lines.append(f"| {label} | {measured} | {'yes' if ok else 'n/a' if ok is None else '**no**'} |")

    for backend, ours, nozstd in (
        ("sqlite", "threadline SqliteSaver", "threadline, no zstd"),
        ("postgres", "threadline PostgresSaver", "threadline, no zstd"),
    ):
        f, z = by.get((backend, ours)), by.get((backend, nozstd))
        if f is None:
            continue
        add(
            f"amplification ≤ 1× at {last} steps ({backend})",
            f"{f.amplification:.2f}× with zstd; {z.amplification:.2f}× without" if z else f"{f.amplification:.2f}×",
            f.amplification <= 1,
        )
    for backend, official, ours, need in (
        ("sqlite", "official SqliteSaver", "threadline SqliteSaver", {last: 1.5}),
        ("postgres", "official PostgresSaver", "threadline PostgresSaver", {min(100, last): 2.0, last: 4.0}),
    ):
        o, f = by.get((backend, official)), by.get((backend, ours))
        if o is None or f is None:
            continue
        for at, times in sorted(need.items()):
            speed = o.both[at] / f.both[at]
            cpu = f" (CPU, client + server: {o.cpu[at] / f.cpu[at]:.2f}×, {f.cpu[at]:.2f} vs {o.cpu[at]:.2f} ms)" if f.cpu.get(at) else ""
            add(
                f"put+put_writes at {at} steps ≥ {times}× faster than official ({backend})",
                f"{speed:.2f}× as fast ({f.both[at]:.2f} vs {o.both[at]:.2f} ms){cpu}",
                speed >= times,
            )
        add(
            f"get-latest ≥ 1.5× faster than official ({backend}), the saver that wrote",
            f"median {f.get_latest:.2f} vs {o.get_latest:.2f} ms ({o.get_latest / f.get_latest:.2f}× as fast); "
            f"best {f.get_latest_min:.2f} vs {o.get_latest_min:.2f} ms",
            o.get_latest >= 1.5 * f.get_latest,
        )
        add(
            f"get-latest no slower than official ({backend}), nothing cached",
            f"median {f.get_latest_cold:.2f} vs {o.get_latest_cold:.2f} ms ({o.get_latest_cold / f.get_latest_cold:.2f}× as fast); "
            f"best {f.get_latest_cold_min:.2f} vs {o.get_latest_cold_min:.2f} ms",
            f.get_latest_cold <= o.get_latest_cold,
        )
        if f.long_get and o.long_get and f.long_get_cold and o.long_get_cold:
            add(
                f"get-latest at {long} messages: ≥ 1.5× faster (the saver that wrote), no slower (nothing cached) ({backend})",
                f"median {f.long_get:.2f} vs {o.long_get:.2f} ms ({o.long_get / f.long_get:.2f}× as fast); "
                f"nothing cached {f.long_get_cold:.2f} vs {o.long_get_cold:.2f} ms ({o.long_get_cold / f.long_get_cold:.2f}× as fast)",
                o.long_get >= 1.5 * f.long_get and f.long_get_cold <= o.long_get_cold,
            )
        for durability in DURABILITY:
            mine, theirs = f.e2e_seconds.get(durability), o.e2e_seconds.get(durability)
            if mine and theirs:
                add(
                    f"end-to-end ReAct faster than official ({backend}, {_mode(durability)})",
                    f"{mine:.2f} vs {theirs:.2f} s ({theirs / mine:.2f}× as fast)",
                    mine < theirs,
                )
        if f.e2e_long_ms and o.e2e_long_ms:
            add(
                f"end-to-end ReAct faster than official ({backend}, one long conversation, CPU per turn at its end)",
                f"{f.e2e_long_ms:.2f} vs {o.e2e_long_ms:.2f} ms ({o.e2e_long_ms / f.e2e_long_ms:.2f}× as fast)",
                f.e2e_long_ms < o.e2e_long_ms,
            )
    return "\n".join(lines)


def _mode(durability: str) -> str:
    return "async saver, ainvoke" if durability == "ainvoke" else f"durability {durability}"


def machine() -> str:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    pg = ""
    try:
        import psycopg

        with psycopg.connect(PG_DSN, connect_timeout=3) as conn:
            pg = conn.execute("SHOW server_version").fetchone()[0]
    except Exception:
        pg = "unavailable"
    import sqlite3

    vers = ", ".join(
        f"{p} {version(p)}"
        for p in ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite", "langgraph-checkpoint-postgres", "langchain-core", "psycopg", "zstandard")
    )
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True).stdout.strip()
    except OSError:
        rev = "?"
    return (
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}; threadline commit {rev}\n"
        f"- machine: {os.cpu_count()} CPUs (`nproc`), {cpu}, {platform.system()} {platform.release()}\n"
        f"- Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, Postgres {pg} (local socket/TCP, same machine)\n"
        f"- {vers}"
    )


def write_results(text: str, start: str = "<!-- generated:start -->", end: str = "<!-- generated:end -->") -> None:
    """Replace the text between ``start`` and ``end`` in RESULTS.md (the rest is written by hand)."""
    body = f"{start}\n{text}\n{end}"
    if not RESULTS.exists():
        RESULTS.write_text(f"# Benchmark results\n\n{body}\n")
        return
    old = RESULTS.read_text()
    if start in old and end in old:
        RESULTS.write_text(old[: old.index(start)] + body + old[old.index(end) + len(end):])
    else:
        RESULTS.write_text(old.rstrip() + f"\n\n{body}\n")
