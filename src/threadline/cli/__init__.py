"""The ``threadline`` command: a thin typer + rich skin over the library.

Command modules register themselves on ``app`` through ``shared.command``, which gives
every command the shared options (``--db``, ``--json``, ``--debug``) and error handling:
``reads`` (threads, history, show, diff, audit, latest, stats), ``changes`` (rollback,
fork, delete, prune), ``repairs`` (fsck, rebuild, setup), ``evolve`` (check, migrate), ``transfers`` (export, import)
and ``demo``. Renderers for people live in ``render``.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback

import typer
import typer.core

DEMO_DB = "threadline-demo.db"
KEY_FILE_VAR = "THREADLINE_ENCRYPTION_KEY_FILE"

def _argument_name(param: typer.core.TyperArgument) -> str:
    """An argument as people type it: its metavar (``THREAD``) or upper-case name, without brackets."""
    return (param.metavar or param.name or "").removesuffix("...").strip("[]").upper()


class Command(typer.core.TyperCommand):
    """A command whose plain help names arguments as they are typed: ``threadline show THREAD
    [CHECKPOINT]`` (typer's own writes ``{THREAD} [[CHECKPOINT]]`` and ``THREAD <str>``)."""

    def collect_usage_pieces(self, ctx: typer.Context) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, typer.core.TyperArgument):
                name = _argument_name(param)
                pieces.append((name if param.required else f"[{name}]") + ("..." if param.nargs != 1 else ""))
        return pieces

    def format_options(self, ctx: typer.Context, formatter: typer.core._click.HelpFormatter) -> None:
        args, opts = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if isinstance(param, typer.core.TyperArgument):
                args.append((_argument_name(param) + ("..." if param.nargs != 1 else ""), record[1]))
            else:
                opts.append(record)
        for title, rows in (("Arguments", args), ("Options", opts)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


app = typer.Typer(
    name="threadline",
    help="Durable, branchable, inspectable state for LangGraph agents.",
    no_args_is_help=True,
    rich_markup_mode=None,  # plain help: no boxes, no type column
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"threadline {version('threadline')}")
        except PackageNotFoundError:  # pragma: no cover - running from a source tree
            typer.echo("threadline (not installed)")
        raise typer.Exit()


@app.callback()
def _group(
    ctx: typer.Context,
    show_version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version and exit."),
    key_file: str = typer.Option(
        None, "--key-file", metavar="FILE", show_default=False,
        help="Encryption keys, one per line, the first for writing (default $THREADLINE_ENCRYPTION_KEY_FILE).",
    ),
) -> None:
    """Durable, branchable, inspectable state for LangGraph agents.

    Read commands open the database read-only; commands that change it need --db or
    $THREADLINE_DB. Exit codes: 0 done, 1 problems found or refused, 2 usage or input error.
    An encrypted database is read with --key-file or the THREADLINE_ENCRYPTION_* variables.
    """
    if key_file is not None:
        # every command opens its database through the library, which reads its keys from here
        before = os.environ.get(KEY_FILE_VAR)
        os.environ[KEY_FILE_VAR] = key_file
        ctx.call_on_close(lambda: os.environ.pop(KEY_FILE_VAR) if before is None else os.environ.update({KEY_FILE_VAR: before}))


def default_db() -> str:
    """``$THREADLINE_DB`` if set, else the demo database in the working directory."""
    return os.environ.get("THREADLINE_DB") or DEMO_DB


# Command modules (each adds its commands to ``app``).
from threadline.cli import reads, changes, tags, edits, repairs, evolve, runs, transfers, operations, keys, store, demo, ui  # noqa: E402,F401,I001  (help lists them in this order)
from threadline.cli.shared import err, explain  # noqa: E402


def main() -> None:
    """The console script: like ``app()``, but a usage error is one line and no error is a traceback."""
    _exit(_run())


def _run() -> int:
    try:
        code = app(standalone_mode=False)
    except (typer.Abort, KeyboardInterrupt):
        err.print("aborted")
        return 1
    except Exception as exc:
        if hasattr(exc, "exit_code") and hasattr(exc, "format_message"):  # click's usage errors
            ctx = getattr(exc, "ctx", None)
            if type(exc).__name__ == "NoArgsIsHelpError":
                typer.echo(exc.format_message())
                return 0
            hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
            err.print(f"error: {exc.format_message()}{hint}", soft_wrap=True, markup=False)
            return exc.exit_code
        if os.environ.get("THREADLINE_DEBUG"):
            traceback.print_exc()
        message, status = explain(exc)
        err.print(f"error: {message}", soft_wrap=True, markup=False)
        return status
    return code if isinstance(code, int) else 0


def _exit(status: int) -> None:
    """Exit once the command is done and its output flushed, without tearing the interpreter
    down: pyarrow's native worker threads (Parquet export) could otherwise abort the process
    during that teardown ("terminate called without an active exception"), seen under load."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
