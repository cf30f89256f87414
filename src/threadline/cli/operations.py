"""Operating commands: sweep, vacuum, partition, backup, restore, bundle-export, bundle-import — each
one call into ``threadline.lifecycle`` (sweeper, vacuum, partition) or ``threadline.transfer`` (backup, bundle)."""

from __future__ import annotations

import time
from typing import Any

import typer
from rich.markup import escape

from threadline import defaults
from threadline.cli import options as O
from threadline.cli.shared import Db, command, explain, named_db, out
from threadline.errors import ConfigError, ThreadlineError
from threadline.lazy import LazyModule

# loaded when a command runs (``threadline --help`` loads none of them)
backends = LazyModule("threadline.backends")
readonly = LazyModule("threadline.backends.readonly")
F = LazyModule("threadline.cli.render.format")
lifecycle = LazyModule("threadline.lifecycle")
H = LazyModule("threadline.lifecycle.health")
P = LazyModule("threadline.lifecycle.partition")
V = LazyModule("threadline.lifecycle.vacuum")
B = LazyModule("threadline.transfer.backup")
BU = LazyModule("threadline.transfer.bundle")
ttls = LazyModule("threadline.ttl")


def _space(report: Any, verb: str = "on disk") -> None:
    if report is None or report.bytes_before is None:
        return
    out.print(f"{verb}: {F.size(report.bytes_before)} → {F.size(report.bytes_after)} ({F.size(report.bytes_freed)} freed)")
    if report.needs_full:
        out.print("[yellow]free space is left that only `threadline vacuum --full` gives back "
                  "(this SQLite file predates incremental auto-vacuum; --full converts it once)[/yellow]")


def _swept(report: Any, **_: Any) -> None:
    if not report.ran:
        out.print("[yellow]not swept[/yellow]: another process is sweeping this database (its lease is held)")
        return
    if report.dry_run:
        out.print(f"dry run, nothing deleted: {report.threads_expired} thread(s) would expire, {report.threads_pruned} would be "
                  f"pruned, {report.checkpoints_deleted} checkpoint(s) would be deleted")
        for tid in report.expired:
            out.print(f"would expire {escape(tid)}")
        for tid, n in report.pruned.items():
            out.print(f"would prune {escape(tid)}: {n} checkpoint(s)")
        return
    out.print(f"swept: {report.threads_expired} thread(s) expired, {report.threads_pruned} pruned, "
              f"{report.checkpoints_deleted} checkpoint(s) deleted")
    _space(report.space)
    for e in report.errors:
        out.print(f"[red]error[/red] {escape(e)}")


@command("sweep", render=_swept, opens=lambda o: "read" if o["dry_run"] else "write", problems=lambda report: bool(report.errors))
def sweep(
    saver: Any,
    ttl: str = O.duration("--ttl", "With --all-threads: the TTL of threads written without one (e.g. 30d)."),
    all_threads: bool = typer.Option(False, "--all-threads", help="Expire every thread of the database idle longer than its TTL, "
                                     "--ttl for those written without one (other programs' threads included)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only list the threads that would expire and the checkpoints that would be pruned."),
    keep_last: int = typer.Option(None, "--keep-last", min=1, metavar="N",
                                  help="Keep the newest N checkpoints of each branch (of each thread with --per thread)."),
    per: str = O.KeepLastPer,
    older_than: str = O.duration("--older-than", "Delete checkpoints older than this; heads and what they need stay."),
    idle: str = O.duration("--idle", "Delete whole threads not updated for this long."),
) -> Any:
    """Run one sweep now, as a saver's background sweeper does: TTL, retention, then space back.
    Threads written under a TTL expire by theirs; others only with --all-threads."""
    if ttl is not None and not all_threads:
        raise ConfigError("--ttl gives a TTL to threads written without one, which a sweep leaves alone: add --all-threads to "
                          "expire every thread idle longer than it (threads written under a TTL expire by theirs without --ttl)")
    saver.ttl = ttls.ttl_of({"default_ttl": ttl / 60}) if ttl is not None else ttls.ttl_of({})
    if keep_last is not None or older_than is not None or idle is not None:
        saver.retention = lifecycle.RetentionPolicy(keep_last=keep_last, older_than=older_than, idle_longer_than=idle, keep_last_per=per)
    return saver.sweep(dry_run=dry_run, all_threads=all_threads)


@command("vacuum", opens="write", render=lambda r, **_: (_space(r), out.print(f"[dim]{'; '.join(r.statements)}[/dim]") if r.statements else None))
def vacuum(
    saver: Any,
    full: bool = typer.Option(False, "--full", help="Rewrite the tables compactly (locks them meanwhile; converts an old SQLite file)."),
) -> V.SpaceReport:
    """Give space freed by deletions back to the file system; shows the bytes on disk before and after."""
    return V.vacuum(saver, full=full)


@command("partition", opens="write", render=lambda r, **_: out.print(
    f"partitioned by month: {', '.join(f'{n} {t} rows moved' for t, n in r.rows.items()) or 'already'}; "
    f"{len(r.created)} partition(s) created"))
def partition(
    saver: Any,
    months_ahead: int = typer.Option(defaults.MONTHS_AHEAD, "--months-ahead", min=1, metavar="N", help="Months to create partitions for ahead of now."),
) -> P.PartitionReport:
    """Postgres: partition checkpoints and writes by month, so the sweeper drops emptied months (locks both tables meanwhile)."""
    return P.partition(saver, months_ahead=months_ahead)


def _backed_up(r: Any, **_: Any) -> None:
    out.print(f"[green]backed up[/green] {r.threads} thread(s) ({r.rows['checkpoints']} checkpoints, {r.rows['blobs']} blobs, "
              f"{r.rows['writes']} writes) to {escape(r.path)}: {F.size(r.bytes)} ({r.method})")


@command("backup", render=_backed_up)
def backup(
    saver: Any,
    to: str = typer.Option(..., "--to", metavar="FILE", help="The backup file to write (a threadline SQLite database)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing file."),
) -> B.BackupReport:
    """A consistent snapshot of the database, values included, in one file (restore it with `threadline restore`)."""
    return B.backup(saver, to, overwrite=overwrite)


def _restored(r: Any, **_: Any) -> None:
    from rich.table import Table

    table = Table(title=f"restored from {escape(r.source)}")
    for col in ("thread_id", "checkpoints", "blobs", "writes", "verified"):
        table.add_column(col)
    same = "identical" + (f" to the bundle (redacted: {', '.join(r.redacted)})" if r.redacted else "")
    for t in r.threads:
        status = f"[red]{escape('; '.join(t.problems[:2]))}[/red]" if t.problems else (f"[green]{escape(same)}[/green]" if r.verified else "rows identical")
        table.add_row(escape(t.thread_id), *(str(t.rows.get(k, 0)) for k in ("checkpoints", "blobs", "writes")), status)
    out.print(table)


def _restore(saver: Any, source: str, thread: list[str] | None, replace: bool, verify: bool, progress: Any) -> B.RestoreReport:
    return B.restore(saver, source, thread_ids=thread or None, replace=replace, verify=verify, progress=progress)


Verify = typer.Option(True, "--verify/--no-verify", help="Load every restored checkpoint on both sides and compare.")
Replace = typer.Option(False, "--replace", help="Overwrite threads that already exist in the target.")


def _archive(options: dict[str, Any]) -> None:
    """The source must be a threadline archive safe to read, checked read-only before the target
    is opened (so a missing, wrong or crafted source creates no target file)."""
    with readonly.open_readonly(options["source"]) as (source, state):
        readonly.require_threadline(options["source"], state, type(source).__name__, current=False)
    B.check_archive(options["source"])


@command("restore", render=_restored, opens="target", problems=lambda r: not r.ok, prepare=_archive)
def restore(
    saver: Any,
    source: str = typer.Argument(..., help="A backup file (threadline backup) or a thread bundle."),
    thread: list[str] = O.Threads,
    replace: bool = Replace,
    verify: bool = Verify,
    progress: Any = None,
) -> B.RestoreReport:
    """Restore threads from a backup into the database named by --db (or $THREADLINE_DB), verifying each."""
    return _restore(saver, source, thread, replace, verify, progress)


@command("bundle-export", render=lambda r, **_: out.print(
    f"[green]bundled[/green] {len(r.threads)} thread(s) ({r.rows['checkpoints']} checkpoints) to {escape(r.path)}: {F.size(r.bytes)}"
    + (f"; redacted: {escape(', '.join(r.redacted))}" if r.redacted else "")))
def bundle_export(
    saver: Any,
    threads: list[str] = typer.Argument(..., help="thread_ids to bundle"),
    to: str = typer.Option(..., "--to", metavar="FILE", help="The bundle file to write."),
    redact: list[str] = typer.Option(None, "--redact", metavar="CHANNEL", help="A channel whose values are replaced by \"[redacted]\" (repeatable)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing file."),
) -> BU.BundleReport:
    """Threads with their values in one file, to attach to a bug report (import it with bundle-import)."""
    return BU.bundle(saver, threads, to, redact=redact or (), overwrite=overwrite)


@command("bundle-import", render=_restored, opens="target", problems=lambda r: not r.ok, prepare=_archive)
def bundle_import(
    saver: Any,
    source: str = typer.Argument(..., help="A thread bundle (threadline bundle-export)."),
    replace: bool = Replace,
    verify: bool = Verify,
    progress: Any = None,
) -> B.RestoreReport:
    """Load a thread bundle into the database named by --db (or $THREADLINE_DB), verifying each thread."""
    return _restore(saver, source, None, replace, verify, progress)


def _health_lines(h: H.Health, **_: Any) -> None:
    color = {"healthy": "green", "degraded": "yellow", "unhealthy": "red"}[h.status]
    out.print(f"[{color}]{h.status}[/{color}] ({h.backend})")
    if h.round_trip is not None:
        rt = h.round_trip
        out.print(f"round trip: put {rt['put_ms']:.1f} ms, get {rt['get_ms']:.1f} ms ({rt['total_ms']:.1f} ms)")
    if h.schema:
        out.print(f"schema: version {h.schema['version']} (this release: {h.schema['latest']})"
                  + (f", pending {h.schema['pending']}" if h.schema["pending"] else ""))
    sw = h.sweeper
    if sw is not None:
        when = f"finished {sw['lag_seconds']:.0f} s ago" if sw["lag_seconds"] is not None else "never finished"
        out.print(f"sweeper: last run {when}" + (", running now" if sw["running"] else "")
                  + (f", {len(sw['errors'])} error(s)" if sw["errors"] else ""))
    elif h.schema and not h.schema["pending"] and not any(s == "unhealthy" for s, _ in h.problems):
        out.print("sweeper: never run on this database")
    if h.growth:
        g = h.growth
        out.print(f"last hour: {g['checkpoints']} checkpoint(s) ({F.size(g['checkpoint_bytes'])}), "
                  f"{g['writes']} pending write(s) ({F.size(g['write_bytes'])})")
    if h.errors:
        out.print("errors in this process: " + ", ".join(f"{k} ×{n}" for k, n in sorted(h.errors.items())))
    for status, line in h.problems:
        out.print(f"[{'red' if status == 'unhealthy' else 'yellow'}]{status}[/]: {escape(line)}")


def _probe(url: str, max_round_trip_ms: float, max_sweep_lag: float | None) -> H.Health:
    """The health of the database at ``url``, opened here: never migrated (a probe with
    migrations pending reports them, degraded); one that cannot be opened is unhealthy."""
    try:
        name = backends.backend_of(url)
    except ThreadlineError as exc:
        return H.unreachable("unknown", explain(exc)[0])
    try:
        with readonly.open_readonly(url) as (checked, state):
            readonly.require_threadline(url, state, type(checked).__name__, current=False)
        if not state.current:
            h = H.Health(name, time.time(), schema=H.schema_of(state))
            H.pending_problem(h)
            return h
        with backends.open_saver(url) as saver:
            return H.check(saver, max_round_trip_ms=max_round_trip_ms, max_sweep_lag=max_sweep_lag)
    except Exception as exc:  # any reason the database cannot be used is the probe's answer
        return H.unreachable(name, explain(exc)[0])


@command("health", opens="none", render=_health_lines, problems=lambda h: h.exit_code)
def health(
    url: str = Db,  # --db (named apart: ``command`` takes ``db`` for the databases it opens itself)
    max_round_trip_ms: float = typer.Option(defaults.MAX_ROUND_TRIP_MS, "--max-round-trip-ms", min=0, metavar="MS",
                                            help="Degraded when the put/get round trip takes longer."),
    max_sweep_lag: str = O.duration("--max-sweep-lag", "Degraded when no sweep finished within this long (e.g. 15m)."),
) -> H.Health:
    """Readiness probe: a timed put/get round trip, schema, sweeper, errors and growth. Exit 0 healthy, 1 degraded, 2 unhealthy or unreachable."""
    return _probe(named_db(url, "health"), max_round_trip_ms, max_sweep_lag)


def _tiered(report: Any, **_: Any) -> None:
    if report.restored:
        out.print(f"restored {len(report.restored)} cold thread(s): {', '.join(map(escape, report.restored))}")
        return
    verb = "would move" if report.dry_run else "moved"
    out.print(f"{verb} {len(report.threads)} idle thread(s), {report.checkpoints} checkpoint(s), to the object store: "
              f"{F.size(report.row_bytes)} of rows → {F.size(report.archive_bytes)} of archives")
    for tid in report.skipped:
        out.print(f"[yellow]skipped[/yellow] {escape(tid)}: it changed while being moved")


@command("tier", render=_tiered, opens=lambda o: "read" if o["dry_run"] else "write")
def tier(
    saver: Any,
    idle: str = O.duration("--idle", "Move threads neither written nor read for this long (e.g. 30d)."),
    restore: list[str] = typer.Option(None, "--restore", metavar="THREAD", help="Bring these cold threads back now (repeatable)."),
    limit: int = typer.Option(1000, "--limit", min=1, metavar="N", help="Move at most N threads (least recently used first)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only show what would move and the bytes saved; change nothing."),
) -> Any:
    """Cold tier: move idle threads whole to the object store (THREADLINE_OFFLOAD); they come back on first use."""
    from threadline.lifecycle.cold import TierReport, warm
    from threadline.lifecycle.cold import tier as tier_out

    if restore:
        back = TierReport(dry_run, restored=[t for t in restore if dry_run or warm(saver, t)])
        return back
    if idle is None:
        raise ConfigError("tier needs --idle DURATION (e.g. --idle 30d) or --restore THREAD")
    return tier_out(saver, idle, dry_run=dry_run, limit=limit)
