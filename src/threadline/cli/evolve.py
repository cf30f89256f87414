"""Deploy commands: ``check`` (the preflight) and ``migrate`` (batch state migration), over
``threadline.evolve``. Exit codes: 0 — nothing wrong; 1 — ``check`` found problems, or
``migrate`` leaves problems the graph still finds (or a migration step failed: nothing was
written), or some threads could not be read (each listed with why; the others were done);
2 — bad input (a --graph or --migrations that does not import or is the wrong kind, a --thread
that names no thread)."""

from __future__ import annotations

from typing import Any

import typer

from threadline.cli import options as O
from threadline.cli.shared import command
from threadline.errors import ConfigError
from threadline.lazy import LazyModule

# loaded when a command runs (``threadline --help`` loads none of them)
evolve = LazyModule("threadline.evolve")
names = LazyModule("threadline.read.names")

Migrations = typer.Option(None, "--migrations", metavar="MODULE:ATTR",
                          help="The app's threadline.evolve.Migrations registry (or a function returning it).")


def _graph_of(graph: Any) -> Any:
    if graph is None:
        raise ConfigError("needs the compiled graph the app will deploy: --graph MODULE:ATTR (or $THREADLINE_GRAPH)")
    return graph


@command("check", render="evolve.check", problems=lambda r: not r.ok)
def check(
    saver: Any,
    graph: str = O.Graph,
    all_checkpoints: bool = typer.Option(False, "--all", help="Check every checkpoint, not only each thread's head."),
    migrations: str = Migrations,
    thread: list[str] = O.Threads,
    progress: Any = None,
) -> evolve.Report:
    """Preflight a deploy: which stored threads no longer fit the graph (removed channels and nodes,
    invalid values, interrupts in removed nodes, types that no longer load).

    With --migrations, check the threads as those migrations present them. Exit 1 when a problem is found
    or a thread cannot be read (listed with why; the others are checked)."""
    registry = evolve.load_migrations(migrations) if migrations else None
    ids = names.expand_threads(saver, thread) if thread else None
    return evolve.check(saver, _graph_of(graph), all_checkpoints=all_checkpoints, migrations=registry, thread_ids=ids, progress=progress)


@command("migrate", render="evolve.migrate", problems=lambda r: not r.ok, opens=lambda o: "write" if o["apply"] else "read")
def migrate(
    saver: Any,
    graph: str = O.Graph,
    migrations: str = Migrations,
    apply: bool = typer.Option(False, "--apply", help="Write: one new checkpoint on the head of each thread a step changes (default: a dry run)."),
    thread: list[str] = O.Threads,
    progress: Any = None,
) -> evolve.MigrateResult:
    """Migrate the threads' heads with the app's migrations (dry run unless --apply; resumable).

    Only threads a step changes are written; threads of another graph are skipped. Exit 1 when the
    graph still finds problems on the migrated heads, a thread cannot be read (listed with why; the
    others are migrated) or a step fails (then nothing is written)."""
    if not migrations:
        raise ConfigError("migrate needs the app's migrations: --migrations MODULE:ATTR")
    registry, graph = evolve.load_migrations(migrations), _graph_of(graph)
    ids = names.expand_threads(saver, thread) if thread else None
    return evolve.migrate(saver, graph, registry, apply=apply, thread_ids=ids, progress=progress)
