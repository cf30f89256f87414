"""Renderers of the lifecycle and transfer reports: rollback/fork, delete/prune plans, fsck,
rebuild, setup, export and import. Long reports are summarized and paged (``--limit``/``--offset``)."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.markup import escape
from rich.text import Text

from threadline.cli.render.format import page_footer, short, size, table, value_text
from threadline.cli.shared import out


def rollback(r: Any, thread: str = "", **_: Any) -> None:
    if not r.written:
        out.print(f"nothing to roll back: {short(r.checkpoint_id)} is already the head of {escape(thread)}, "
                  "so a new checkpoint would change nothing; nothing was written")
        return
    out.print(f"[green]rolled back[/green] {escape(thread)}: new head {short(r.checkpoint_id)} carries the state of "
              f"{short(r.source_checkpoint_id)}; the previous head {short(r.previous_head)} stays on its branch")


def fork(r: Any, thread: str = "", to: str = "", **_: Any) -> None:
    out.print(f"[green]forked[/green] {escape(thread)} @ {short(r.source_checkpoint_id)} → thread {escape(to)}: "
              f"head {short(r.checkpoint_id)} ({r.blobs_copied} blob rows copied)")


def _plans(plans: list[Any], dry_run: bool, limit: int, offset: int) -> None:
    t = table("would delete" if dry_run else "deleted", "thread_id", ">checkpoints", ">writes", ">blobs", ">freed", "thread")
    for p in plans[offset:offset + limit]:
        t.add_row(escape(p.thread_id), str(len(p.checkpoints)), str(p.writes), str(p.blobs), size(p.bytes_freed),
                  "deleted" if p.thread_deleted else "kept")
    out.print(t)
    if footer := page_footer(len(plans[offset:offset + limit]), offset, len(plans), "threads"):
        out.print(footer)


def _checkpoints(plan: Any, dry_run: bool) -> None:
    for ns, cid in plan.checkpoints:
        out.print(f"  {escape(plan.thread_id)}  {'would delete' if dry_run else 'deleted'} {short(cid)}"
                  + (f"  (checkpoint_ns {escape(ns)})" if ns else ""))


def delete(plan: Any, dry_run: bool = False, **_: Any) -> None:
    _plans([plan], dry_run, 1, 0)
    _checkpoints(plan, dry_run)
    for cid, parent in plan.reparented.items():
        out.print(f"  {short(cid)}: parent → {short(parent) if parent else '(none: a root)'}")


def prune(report: Any, dry_run: bool = False, verbose: bool = False, limit: int = 20, offset: int = 0, **_: Any) -> None:
    plans = sorted(report.plans, key=lambda p: (-p.bytes_freed, p.thread_id))
    if plans:
        _plans(plans, dry_run, limit, offset)
    if verbose:
        for p in plans[offset:offset + limit]:
            _checkpoints(p, dry_run)
    gone = len(report.threads_deleted)
    out.print(f"{report.checkpoints} checkpoint(s) in {len(plans)} thread(s); {'would free' if dry_run else 'freed'} "
              f"{size(report.bytes_freed)}" + (f"; {gone} whole thread(s) {'would go' if dry_run else 'deleted'}" if gone else "")
              + ("" if verbose or not plans else "  [dim](--verbose lists the checkpoints)[/dim]"))
    if report.space is not None and report.space.bytes_before is not None:
        out.print(f"on disk: {size(report.space.bytes_before)} → {size(report.space.bytes_after)}")


def fsck(report: Any, limit: int = 50, offset: int = 0, **_: Any) -> None:
    if not report.findings:
        out.print(f"[green]ok[/green]: {report.threads_checked} thread(s) checked, no problem found")
        return
    page = report.findings[offset:offset + limit]
    with_ns = any(f.checkpoint_ns for f in page)
    t = table(f"fsck: {len(report.findings)} finding(s) in {report.threads_checked} thread(s)",
              "kind", "thread_id", *(["ns"] if with_ns else []), "checkpoint", "~detail", "repair")
    for f in page:
        fix = "repaired" if f.repaired else "notice" if f.notice else ("safe: --repair" if f.repairable else "manual")
        t.add_row(f.kind, escape(f.thread_id), *([escape(f.checkpoint_ns or "")] if with_ns else []),
                  short(f.checkpoint_id) if f.checkpoint_id else "", escape(f.detail), fix)
    out.print(t)
    if all(f.notice for f in report.findings):
        out.print(f"[green]ok[/green]: only notices, no damage ({report.threads_checked} thread(s) checked)")
    if footer := page_footer(len(page), offset, len(report.findings), "findings"):
        out.print(footer)


def rebuild(r: Any, thread: str = "", **_: Any) -> None:
    out.print(f"[bold]{escape(thread)}[/bold] @ {short(r.checkpoint_id)} rebuilt from its parent {short(r.parent_checkpoint_id)}")
    out.print(f"[green]matches[/green]: {', '.join(r.matches) or '-'}")
    for ch, change in r.differs.items():
        out.print(f"[yellow]differs[/yellow] {escape(ch)}: {escape(value_text(change))}")
    if r.missing:
        out.print(f"[red]missing blobs[/red]: {', '.join(r.missing)}" + (" — restored" if r.restored else " (--apply restores them)"))


def migrate_format(report: Any, **_: Any) -> None:
    out.print(f"storage format 2: {report.written} head row(s) written over {report.threads} thread(s), {report.current} already current")
    for tid, why in report.failed.items():
        out.print(f"[red]not migrated[/red] {escape(tid)}: {escape(why)}")


def setup(result: dict[str, Any], **_: Any) -> None:
    out.print(f"threadline tables ready (schema version {result['schema_version']})")
    if result["official_saver_tables"]:
        out.print("the database also holds an official LangGraph saver's tables: threadline's saver adopts each of "
                  "their threads when a program first reads it")


def export(report: Any, **_: Any) -> None:
    t = table(f"exported {report.threads} thread(s) to {escape(report.out_dir)}", "table", ">rows", "~partitions")
    for name, n in report.rows.items():
        t.add_row(name, str(n), ", ".join(f"dt={p}" for p in report.partitions[name]))
    out.print(t)
    out.print(f"[dim]query it with DuckDB's Python package (installed with {escape('threadline[export]')}), in {escape(sys.executable)}:[/dim]")
    for line in duckdb_example(report.out_dir).splitlines():  # whole lines (soft-wrapped): they are copied and pasted
        out.print(Text("  " + line, style="dim"), soft_wrap=True)


def duckdb_example(out_dir: str) -> str:
    """Python that prints the writes per node of an export in ``out_dir`` with the duckdb package."""
    pattern = f"{out_dir.rstrip('/')}/writes/*/*.parquet".replace("'", "''")
    sql = (f"SELECT node, COUNT(*) AS writes, SUM(bytes) AS bytes FROM read_parquet('{pattern}', hive_partitioning = true) "
           "GROUP BY node ORDER BY writes DESC")
    return f"import duckdb\nduckdb.sql({json.dumps(sql, ensure_ascii=False)}).show()"


def imported(report: Any, source: str = "", **_: Any) -> None:
    failed = [t for t in report.threads if t.verified is False]
    shown = failed or report.threads[:20]
    t = table(f"imported from {escape(source)}", "thread_id", ">checkpoints", ">writes", "~verified")
    for th in shown:
        status = "-" if th.verified is None else ("[green]identical[/green]" if th.verified else f"[red]{escape('; '.join(th.mismatches[:3]))}[/red]")
        t.add_row(escape(th.thread_id), str(th.checkpoints), str(th.writes), status)
    out.print(t)
    if len(shown) < len(report.threads):
        out.print(f"[dim]{len(report.threads) - len(shown)} more thread(s) imported identically (--json lists all)[/dim]")
