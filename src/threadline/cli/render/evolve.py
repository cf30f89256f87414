"""Renderers of the preflight report (``threadline check``) and the migration plan/result
(``threadline migrate``)."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from threadline.cli.render.format import table
from threadline.cli.shared import out


def _unreadable(failed: list[tuple[str, str]], what: str) -> None:
    for thread_id, why in failed:
        out.print(f"[red]{what}[/red] thread {escape(thread_id)}: {escape(why)}", soft_wrap=True)


def check(report: Any, **_: Any) -> None:
    what = "checkpoint(s)" if report.all_checkpoints else "thread head(s)"
    if report.ok:
        out.print(f"[green]ok[/green]: {report.checkpoints} {what} of {report.threads} thread(s) fit the graph ({report.seconds:.2f} s)")
        return
    if report.problems:
        t = table(f"check: {len(report.problems)} problem(s) in {report.checkpoints} {what} of {report.threads} thread(s)",
                  "problem", "subject", "threads", "checkpoints", "~examples", "~detail")
        for p in report.problems:
            t.add_row(p.kind, escape(p.subject), str(p.threads), str(p.count), escape(", ".join(p.examples)), escape(p.detail))
        out.print(t)
        out.print("fix: register migrations (docs/migrations.md) and run `threadline migrate --graph … --migrations …`")
    else:
        out.print(f"{report.checkpoints} {what} of {report.threads} thread(s) fit the graph")
    _unreadable(report.unreadable, "not checked:")


def migrate(result: Any, **_: Any) -> None:
    skipped = "".join((f"; {result.unchanged} unchanged" if result.unchanged else "",
                       f"; {len(result.other_graph)} of another graph, skipped" if result.other_graph else "",
                       f"; {len(result.failed)} could not be read" if result.failed else ""))
    if result.dry_run:
        out.print(f"dry run: {result.to_migrate} of {result.threads} thread(s) would be migrated{skipped}; nothing was written "
                  "(pass --apply to write)")
    else:
        out.print(f"[green]migrated[/green] {result.migrated} of {result.threads} thread(s){skipped}"
                  + (f"; {result.moved} skipped (their head moved: run again)" if result.moved else "")
                  + f" ({result.seconds:.2f} s)")
    if result.examples:
        more = result.to_migrate - len(result.examples)
        t = table("threads and the steps that change them" + (f" (the first {len(result.examples)}; {more} more)" if more else ""),
                  "thread_id", "~steps")
        for thread_id, steps in result.examples:
            t.add_row(escape(thread_id), escape(", ".join(steps)))
        out.print(t)
    if result.other_graph:
        shown = ", ".join(result.other_graph[:10]) + (f" … and {len(result.other_graph) - 10} more" if len(result.other_graph) > 10 else "")
        out.print(f"skipped, of another graph (no channel or node in common with --graph): {escape(shown)}")
    _unreadable(result.failed, "not migrated:")
    for name, n in sorted(result.remaining.items()):
        out.print(f"[red]still wrong after migration[/red]: {escape(name)} on {n} thread(s)")
