"""Renderers of the preflight report (``threadline check``) and the migration plan/result
(``threadline migrate``)."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from threadline.cli.render.format import table
from threadline.cli.shared import out


def check(report: Any, **_: Any) -> None:
    what = "checkpoint(s)" if report.all_checkpoints else "thread head(s)"
    if report.ok:
        out.print(f"[green]ok[/green]: {report.checkpoints} {what} of {report.threads} thread(s) fit the graph ({report.seconds:.2f} s)")
        return
    t = table(f"check: {len(report.problems)} problem(s) in {report.checkpoints} {what} of {report.threads} thread(s)",
              "problem", "subject", "threads", "checkpoints", "~examples", "~detail")
    for p in report.problems:
        t.add_row(p.kind, escape(p.subject), str(p.threads), str(p.count), escape(", ".join(p.examples)), escape(p.detail))
    out.print(t)
    out.print("fix: register migrations (docs/migrations.md) and run `threadline migrate --graph … --migrations …`")


def migrate(result: Any, **_: Any) -> None:
    if result.dry_run:
        out.print(f"dry run: {result.to_migrate} of {result.threads} thread(s) would be migrated; nothing was written "
                  "(pass --apply to write)")
    else:
        out.print(f"[green]migrated[/green] {result.migrated} of {result.threads} thread(s)"
                  + (f"; {result.moved} skipped (their head moved: run again)" if result.moved else "")
                  + f" ({result.seconds:.2f} s)")
    if result.examples:
        t = table("threads and the steps that change them", "thread_id", "~steps")
        for thread_id, steps in result.examples:
            t.add_row(escape(thread_id), escape(", ".join(steps) or "(record only)"))
        out.print(t)
    for name, n in sorted(result.remaining.items()):
        out.print(f"[red]still wrong after migration[/red]: {escape(name)} on {n} thread(s)")
