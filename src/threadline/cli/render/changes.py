"""Renderers of the lifecycle and transfer reports: rollback/fork, delete/prune plans, fsck,
rebuild, export and import."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from threadline.cli.render.format import brief, size
from threadline.cli.shared import out


def rollback(r: Any, thread: str = "", **_: Any) -> None:
    out.print(f"[green]rolled back[/green] {escape(thread)}: new head {r.checkpoint_id} (parent {r.parent_checkpoint_id}) "
              f"carries the state of {r.source_checkpoint_id}; previous head {r.previous_head} kept on its branch")


def fork(r: Any, thread: str = "", checkpoint: str = "", to: str = "", **_: Any) -> None:
    out.print(f"[green]forked[/green] {escape(thread)}@{checkpoint} → thread {escape(to)} head {r.checkpoint_id} "
              f"({r.blobs_copied} blob rows copied)")


def plans(plans: list[Any], dry_run: bool) -> None:
    table = Table(title="would delete" if dry_run else "deleted")
    for col in ("thread_id", "checkpoints", "writes", "blobs", "bytes freed", "thread"):
        table.add_column(col, justify="left" if col == "thread_id" else "right")
    for p in plans:
        table.add_row(escape(p.thread_id), str(len(p.checkpoints)), str(p.writes), str(p.blobs), size(p.bytes_freed),
                      "deleted" if p.thread_deleted else "kept")
    out.print(table)


def delete(plan: Any, dry_run: bool = False, **_: Any) -> None:
    plans([plan], dry_run)
    for ns, cid in plan.checkpoints:
        out.print(f"  {'would delete' if dry_run else 'deleted'} {escape(ns or '(root)')} {cid}")
    for cid, parent in plan.reparented.items():
        out.print(f"  {cid}: parent → {parent or '(none: root)'}")


def prune(report: Any, dry_run: bool = False, **_: Any) -> None:
    plans(report.plans, dry_run)
    if dry_run:
        for p in report.plans:
            for ns, cid in p.checkpoints:
                out.print(f"  {escape(p.thread_id)} {escape(ns or '(root)')} {cid}")
    verb = "would free" if dry_run else "freed"
    out.print(f"{report.checkpoints} checkpoint(s), {verb} {size(report.bytes_freed)}"
              + (f"; threads deleted: {', '.join(report.threads_deleted)}" if report.threads_deleted else ""))
    if report.space is not None and report.space.bytes_before is not None:
        out.print(f"on disk: {size(report.space.bytes_before)} → {size(report.space.bytes_after)}")


def fsck(report: Any, **_: Any) -> None:
    if not report.findings:
        out.print(f"[green]ok[/green]: {report.threads_checked} thread(s) checked, no problem found")
        return
    table = Table(title=f"fsck: {report.threads_checked} thread(s)")
    for col in ("kind", "thread_id", "ns", "checkpoint", "detail", "repair"):
        table.add_column(col, overflow="fold")
    for f in report.findings:
        fix = "repaired" if f.repaired else ("safe: --repair" if f.repairable else "manual")
        table.add_row(f.kind, escape(f.thread_id), escape(f.checkpoint_ns or ""), f.checkpoint_id or "", escape(f.detail), fix)
    out.print(table)


def rebuild(r: Any, thread: str = "", **_: Any) -> None:
    out.print(f"[bold]{escape(thread)}[/bold] @ {r.checkpoint_id} rebuilt from parent {r.parent_checkpoint_id}")
    out.print(f"[green]matches[/green]: {', '.join(r.matches) or '-'}")
    for ch, change in r.differs.items():
        out.print(f"[yellow]differs[/yellow] {escape(ch)}: {escape(brief(change, 200))}")
    if r.missing:
        out.print(f"[red]missing blobs[/red]: {', '.join(r.missing)}" + (" — restored" if r.restored else " (use --apply to restore)"))


def export(report: Any, **_: Any) -> None:
    table = Table(title=f"exported {report.threads} thread(s) to {escape(report.out_dir)}")
    for col in ("table", "rows", "partitions"):
        table.add_column(col)
    for name, n in report.rows.items():
        table.add_row(name, str(n), ", ".join(f"dt={p}" for p in report.partitions[name]))
    out.print(table)
    out.print(f"[dim]query: duckdb -c \"SELECT node, COUNT(*), SUM(bytes) FROM read_parquet('{escape(report.out_dir)}/writes/*/*.parquet', "
              "hive_partitioning=true) GROUP BY node\"[/dim]")


def imported(report: Any, source: str = "", **_: Any) -> None:
    table = Table(title=f"imported from {escape(source)}")
    for col in ("thread_id", "checkpoints", "writes", "verified"):
        table.add_column(col)
    for t in report.threads:
        status = "-" if t.verified is None else ("[green]identical[/green]" if t.verified else f"[red]{escape('; '.join(t.mismatches[:3]))}[/red]")
        table.add_row(escape(t.thread_id), str(t.checkpoints), str(t.writes), status)
    out.print(table)
