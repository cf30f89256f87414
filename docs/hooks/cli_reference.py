"""MkDocs hook: the CLI reference page (cli-reference.md), rendered at build time from the
``threadline`` command itself (typer's click command, each command's own ``--help``), so it
cannot drift from the code. The page is never written to docs/: it exists only in the build."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import typer.main
from mkdocs.structure.files import File, Files

PAGE = "cli-reference.md"
WIDTH = 100  # help text wrapped at a fixed width, whatever the terminal of the build


def commands(group: Any, ctx: Any) -> Iterator[tuple[Any, Any]]:
    """Every visible command under ``group`` (a click group, as typer builds it: typer carries
    its own copy of click) with its context, in ``--help`` order, depth first (a sub-group
    such as ``store`` comes before its own commands)."""
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        sub = command.context_class(command, info_name=name, parent=ctx, terminal_width=WIDTH, max_content_width=WIDTH)
        yield sub, command
        if hasattr(command, "list_commands"):
            yield from commands(command, sub)


def render() -> str:
    from threadline.cli import app

    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="threadline", terminal_width=WIDTH, max_content_width=WIDTH)
    found = list(commands(root, ctx))
    lines = [
        "# CLI reference",
        "",
        "Every command's `--help`, generated from the `threadline` command at build time. "
        "The [guide to the command](cli.md) explains them with examples.",
        "",
        "| command | what it does |",
        "| --- | --- |",
    ]
    for sub, command in found:
        path = sub.command_path
        summary = command.get_short_help_str(limit=90).replace("|", "\\|")
        lines.append(f"| [`{path}`](#{path.replace(' ', '-')}) | {summary} |")
    lines += ["", "## threadline", "", "```text", root.get_help(ctx), "```", ""]
    for sub, command in found:
        lines += [f"## {sub.command_path}", "", "```text", command.get_help(sub), "```", ""]
    return "\n".join(lines)


def on_files(files: Files, config) -> Files:
    files.append(File.generated(config, PAGE, content=render()))
    return files
