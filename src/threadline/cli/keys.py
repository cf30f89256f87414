"""Encryption keys: ``threadline rekey`` — one call into ``threadline.lifecycle.rekey``.

The keys come from the environment, as for every command (``THREADLINE_ENCRYPTION_KEY``
or ``THREADLINE_ENCRYPTION_KEY_FILE``: the key to seal with; ``THREADLINE_ENCRYPTION_OLD_KEYS``:
the keys rows may still be sealed with). See docs/security.md.
"""

from __future__ import annotations

from typing import Any

import typer
from rich.markup import escape

from threadline.cli import options as O
from threadline.cli.shared import command, out
from threadline.lazy import LazyModule

# loaded when a command runs (``threadline --help`` loads none of them)
lifecycle = LazyModule("threadline.lifecycle")
rekeying = LazyModule("threadline.lifecycle.rekey")


def _render(report: lifecycle.RekeyReport, **_: Any) -> None:
    from rich.table import Table

    target = f"key {report.key_id}" if report.key_id else "checksums only (no encryption key configured)"
    table = Table(title=f"rekey → {target}{' (dry run)' if report.dry_run else ''}: {report.threads} thread(s)")
    for col in ("rows", "re-sealed" if not report.dry_run else "to re-seal", "already current"):
        table.add_column(col, justify="left" if col == "rows" else "right")
    for t in rekeying.TABLES:
        table.add_row(t, str(report.resealed[t]), str(report.current[t]))
    out.print(table)
    for problem in report.unreadable[:20]:
        out.print(f"[red]unreadable[/red] {escape(problem)}")
    if len(report.unreadable) > 20:
        out.print(f"[red]… {len(report.unreadable) - 20} more unreadable rows[/red]")


@command("rekey", render=_render, opens="write", problems=lambda report: not report.ok)
def rekey(
    saver: Any,
    thread: list[str] = O.Threads,
    dry_run: bool = typer.Option(False, "--dry-run", help="Count the rows that would be re-sealed; change nothing."),
    progress: Any = None,
) -> lifecycle.RekeyReport:
    """Re-seal every row under the current encryption key (encrypt, rotate or decrypt), one thread at a time.

    Online and resumable: savers keep working, rows already current are skipped. Each re-sealed row is read back and verified before its thread is committed."""
    return lifecycle.rekey(saver, thread_ids=thread or None, dry_run=dry_run, progress=progress)
