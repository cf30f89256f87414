"""The documentation site (``make docs``): mkdocs.yml builds with --strict (a warning, a broken
link or anchor, a docstring griffe cannot read fails it), every guide of docs/ is on the site,
and the CLI reference, generated at build time, holds every command the ``threadline`` command
has, as its own ``--help`` prints it. Needs the [docs] extra (part of [test]): skipped without
it, a failure under CI=true."""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from backends import in_ci
from threadline.cli import app

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    missing = [name for name in TOOLS if importlib.util.find_spec(name.split(".")[0]) is None]
    if missing:
        reason = f"the docs tools are not installed ({', '.join(missing)}): pip install -e '.[docs]'"
        if in_ci():
            pytest.fail(f"CI=true and the docs site cannot be built: {reason}", pytrace=False)
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    return out


def _text(page: Path) -> str:
    """A built page's text, tags stripped, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8"))).split())


def test_every_guide_and_reference_page_is_built_and_nothing_is_fetched(site: Path) -> None:
    guides = sorted(p.stem for p in (ROOT / "docs").glob("*.md") if p.stem != "index")
    assert guides, "no guides in docs/"
    for name in guides + ["cli-reference", "benchmarks", "reference/savers", "reference/errors"]:
        assert (site / f"{name}.html").is_file(), f"{name} is not on the site"
    # the API reference is rendered from the docstrings, not left as `::: identifier` lines
    savers = (site / "reference" / "savers.html").read_text(encoding="utf-8")
    assert ":::" not in savers and 'id="threadline.backends.sqlite.SqliteSaver"' in savers
    assert "threadline gives LangGraph agents" in _text(site / "index.html")  # the README's introduction
    # the theme's web fonts are off: no page loads a style sheet or script from another host
    fetching = [p.name for p in site.rglob("*.html") if re.search(r'<(?:link|script)[^>]+(?:href|src)="https?://', p.read_text(encoding="utf-8"))]
    assert not fetching, f"pages that load from another host: {fetching}"
    # generated pages exist only in the build, so they cannot drift
    assert not (ROOT / "docs" / "cli-reference.md").exists() and not (ROOT / "docs" / "benchmarks.md").exists()


def _commands(path: tuple[str, ...] = ()) -> dict[tuple[str, ...], str]:
    """Every command path the CLI's own ``--help`` lists (sub-groups walked), with its help."""
    result = CliRunner().invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    found = {path: result.output} if path else {}
    listing = result.output.split("\nCommands:\n", 1)
    if len(listing) == 2:
        for name in re.findall(r"^  (\S+)", listing[1], flags=re.M):
            found.update(_commands((*path, name)))
    return found


def test_the_cli_reference_holds_every_command_as_its_help_prints_it(site: Path) -> None:
    commands = _commands()
    assert ("store", "put") in commands and ("threads",) in commands  # a sub-group's commands too
    page = site / "cli-reference.html"
    headings = set(re.findall(r'<h2 id="([^"]+)"', page.read_text(encoding="utf-8")))
    expected = {"-".join(("threadline", *path)) for path in commands}
    assert expected <= headings, f"commands missing from the CLI reference: {sorted(expected - headings)}"
    text = _text(page)
    for path, help_text in commands.items():
        usage = " ".join(help_text.split("\n\n", 1)[0].split())  # e.g. "Usage: threadline store put [OPTIONS] ..."
        assert usage.startswith("Usage: threadline " + " ".join(path)) and usage in text, usage
