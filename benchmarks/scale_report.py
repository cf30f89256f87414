"""The Markdown of ``scale.py``'s results: one table per backend, official vs threadline, with ratios.

``render(results, args, machine)``: ``results`` as the ``--child`` processes printed them
(JSON: seconds, ms, MB, bytes), ``args`` the sizes, ``machine`` the run's header lines.
"""

from __future__ import annotations

from typing import Any

NAMES = {"sqlite-official": "official SqliteSaver", "sqlite": "threadline SqliteSaver",
         "postgres-official": "official PostgresSaver", "postgres": "threadline PostgresSaver"}


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f} ms" if x < 100 else f"{x:.0f} ms"


def _s(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f} s" if x < 10 else f"{x:.1f} s"


def _mb(x: float | None) -> str:
    return "—" if x is None else f"{x / 1e6:.1f} MB"


def _ratio(a: float | None, b: float | None) -> str:
    return "" if not a or not b else f" ({b / a:.2f}×)"


def _get(r: dict | None, *path: str) -> Any:
    for p in path:
        if r is None:
            return None
        r = r.get(p)
    return r


def rows_of(off: dict | None, tl: dict | None, args: Any) -> list[tuple[str, str, str]]:
    """(figure, official, threadline with its ratio to the official) rows."""
    out = []

    def add(label: str, fmt: Any, *path: str, official_path: tuple | None = None, note_off: str = "—") -> None:
        a = _get(off, *(official_path or path))
        b = _get(tl, *path)
        out.append((label, fmt(a) if a is not None else note_off if off is not None else "not run", (fmt(b) + _ratio(a, b)) if b is not None else "—"))

    n = args.threads * (args.steps + 2)
    add(f"populate: checkpoints/s ({args.threads:,} threads × {args.steps} supersteps, {n:,} checkpoints)", lambda x: f"{x:.0f}/s", "populate", "per_s")
    add("populate: put+put_writes ms/superstep (mean)", _ms, "populate", "ms_per_superstep")
    add("populate: CPU ms/superstep (client + server)", _ms, "populate", "cpu_ms_per_superstep")
    add("long thread: put+put_writes ms/superstep at step ~100 (median)", _ms, "long", "at100_ms")
    add(f"long thread: put+put_writes ms/superstep at step ~{args.big:,} (median)", _ms, "long", "atN_ms")
    add("long thread: CPU ms/superstep at ~100 (client + server)", _ms, "long", "at100_cpu_ms")
    add(f"long thread: CPU ms/superstep at ~{args.big:,} (client + server)", _ms, "long", "atN_cpu_ms")
    for what, key in (("wall", "ms"), ("CPU", "cpu_ms")):
        out.append((f"long thread: step ~N ÷ step ~100 ({what}; 1.00 = flat)",
                    *(f"{_get(r, 'long', 'atN_' + key) / _get(r, 'long', 'at100_' + key):.2f}" if _get(r, "long") else "—" for r in (off, tl))))
    add("threads: every thread_id (official: `list(None)`, distinct)", _s, "reads", "threads_all_s", official_path=("reads", "threads_list_s"))
    part = _get(off, "reads", "threads_list_partial")
    if part is not None:
        out[-1] = (out[-1][0], f"not run to the end (blocks other sessions); the first {_get(off, 'reads', 'threads_list_limit'):,} checkpoints: {_s(part)}", out[-1][2])
    add("threads: every thread_id (official: `SELECT DISTINCT thread_id` by hand)", _s, "reads", "threads_all_s", official_path=("reads", "threads_sql_s"))
    add("threads: first page of 50 + total (threadline `list_threads`)", _s, "reads", "threads_page_s", note_off="no listing")
    add("latest: `get_tuple` of a thread's head (median of 200)", _ms, "reads", "get_latest_ms")
    add("latest: `count` at every thread's head (official: a `get_tuple` each)", _s, "reads", "latest_all_s")
    add(f"history: `list` of the long thread ({args.big + 2:,} checkpoints)", _s, "reads", "history_s")
    out.append(("history: ms per checkpoint", *(_ms(1000 * _get(r, "reads", "history_s") / _get(r, "reads", "history_checkpoints")) if _get(r, "reads", "history_s") else "—" for r in (off, tl))))
    add(f"prune keep_latest, {min(args.prune, args.threads // 2):,} threads: checkpoints removed/s", lambda x: f"{x:,.0f}/s", "prune", "keep_latest", "per_s", note_off="no prune")
    add("prune keep_latest, the long thread: checkpoints removed/s", lambda x: f"{x:,.0f}/s", "prune", "long_keep_latest", "per_s", note_off="no prune")
    add("retention `keep_last=10` (threadline.lifecycle), checkpoints removed/s", lambda x: f"{x:,.0f}/s", "prune", "retention", "per_s", note_off="no retention")
    add("bytes on disk (before pruning)", _mb, "bytes")
    add("peak RSS after populate (`ru_maxrss`)", lambda x: f"{x:.0f} MB", "rss_mb_populate")
    add("peak RSS, whole run", lambda x: f"{x:.0f} MB", "rss_mb")
    add("blob cache held / its bound", lambda x: x, "cache_text", note_off="no cache")
    add("process wall time (whole run)", _s, "process_s")
    return out


def render(results: list[dict], args: Any, machine: str) -> str:
    by = {r["saver"]: r for r in results}
    for r in results:
        if "cache" in r:
            r["cache_text"] = f"{r['cache']['bytes'] / 2**20:.1f} / {r['cache']['max_bytes'] / 2**20:.0f} MiB"
    lines = [
        machine,
        "",
        f"Command: `benchmarks/scale.py --threads {args.threads} --steps {args.steps} --big {args.big} "
        f"--block {args.block} --prune {args.prune}"
        f"{'' if getattr(args, 'savers', None) in (None, 'sqlite-official,sqlite,postgres-official,postgres') else ' --savers ' + args.savers}`. Ratios in parentheses: threadline ÷ official "
        "(< 1: faster or smaller; for rates > 1 is faster). Each saver ran in its own process (its peak RSS is its own).",
    ]
    for backend, title, cls in (("sqlite", "SQLite", "SqliteSaver"), ("postgres", "Postgres", "PostgresSaver")):
        off, tl = by.get(f"{backend}-official"), by.get(backend)
        if off is None and tl is None:
            continue
        lines += ["", f"#### {title}", "", f"| figure | official {cls} | threadline {cls} |", "|---|---|---|"]
        lines += [f"| {a} | {b} | {c} |" for a, b, c in rows_of(off, tl, args)]
    removed = {r["saver"]: _get(r, "prune", "keep_latest", "removed") for r in results}
    cut = [NAMES.get(r["saver"], r["saver"]) for r in results if "rss_mb" not in r]
    if cut:
        lines += ["", f"Not run to the end (figures after the last phase that finished are missing): {', '.join(cut)}."]
    lines += ["", f"Checkpoints removed by `prune(keep_latest)`: {', '.join(f'{k} {v:,}' for k, v in removed.items() if v)}."]
    return "\n".join(lines)
