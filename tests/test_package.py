"""The package as an index and its users receive it: ``python -m build`` makes the sdist and
the wheel (the wheel from the unpacked sdist, so the sdist is complete enough to build),
``twine check --strict`` passes both, and they hold the package, its data files, LICENSE and
the metadata pyproject.toml states — nothing of a developer's checkout besides.

The build runs on a copy of the checkout's files (as git lists them) with the clutter a
working tree gathers planted in it, so it neither writes into the checkout nor depends on it.
"""

from __future__ import annotations

import email.parser
import importlib.metadata
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

import threadline

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
NAME = f"threadline-{PROJECT['version']}"
# what a working tree holds that no distribution may: venvs, byte code, databases, caches, results
CLUTTER = (
    ".venv/lib/python3/site-packages/stray.py",
    "src/threadline/__pycache__/saver.cpython-311.pyc",
    "src/threadline/threadline-demo.db",
    "threadline-demo.db",
    ".pytest_cache/v/cache/lastfailed",
    "benchmarks/results/run.json",
    "build/lib/threadline/stray.py",
)


def _checkout_files() -> list[str]:
    """The checkout's files as git lists them: tracked, and untracked ones not ignored."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    return [f for f in listed if (ROOT / f).is_file()]


def _package_files() -> set[str]:
    return {f.removeprefix("src/") for f in _checkout_files() if f.startswith("src/threadline/")}


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(sdist, wheel) built from a cluttered copy of the checkout."""
    tree = tmp_path_factory.mktemp("tree")
    for name in _checkout_files():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, tree / name)
    for name in CLUTTER:
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text("clutter")
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(tree)],
        capture_output=True, text=True, timeout=600,
    )
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return sdist, wheel


def test_twine_check_strict_passes(dists: tuple[Path, Path]) -> None:
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, dists)],
        capture_output=True, text=True, timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("PASSED") == 2, checked.stdout


def test_the_wheel_holds_the_package_its_data_and_license(dists: tuple[Path, Path]) -> None:
    with zipfile.ZipFile(dists[1]) as wheel:
        names = set(wheel.namelist())
        metadata = email.parser.Parser().parsestr(wheel.read(f"{NAME}.dist-info/METADATA").decode())
    package = {n for n in names if not n.startswith(f"{NAME}.dist-info/")}
    # every file of the package, data files included (templates, static, the zstd dictionary)
    assert package == _package_files()
    assert {"threadline/py.typed", "threadline/codec/messages.zdict", "threadline/web/templates/base.html",
            "threadline/web/static/vendor/cytoscape.min.js"} <= package
    assert f"{NAME}.dist-info/licenses/LICENSE" in names
    assert "MIT License" in (ROOT / "LICENSE").read_text()

    assert metadata["Name"] == "threadline" and metadata["Version"] == PROJECT["version"]
    assert metadata["Summary"] == PROJECT["description"]
    assert metadata["Requires-Python"] == PROJECT["requires-python"] == ">=3.11"
    assert metadata["License-Expression"] == "MIT" and metadata["License-File"] == "LICENSE"
    assert metadata.get_all("Classifier") == PROJECT["classifiers"]
    assert "Typing :: Typed" in PROJECT["classifiers"]
    stated = {c.rsplit(" :: ", 1)[1] for c in PROJECT["classifiers"] if c.startswith("Programming Language :: Python :: 3.")}
    assert stated == {"3.11", "3.12", "3.13"}
    assert metadata["Description-Content-Type"] == "text/markdown"


def test_the_sdist_holds_the_source_and_nothing_of_the_working_tree(dists: tuple[Path, Path]) -> None:
    with tarfile.open(dists[0]) as sdist:
        members = {m.name.removeprefix(f"{NAME}/") for m in sdist.getmembers() if m.isfile()}
    source = {n.removeprefix("src/") for n in members if n.startswith("src/threadline/")}
    assert source == _package_files()
    others = members - {f"src/{n}" for n in source}
    assert {n for n in others if not n.startswith("src/threadline.egg-info/")} == {
        "PKG-INFO", "setup.cfg", "pyproject.toml", "MANIFEST.in", "README.md", "LICENSE", "CHANGELOG.md",
    }
    # the suite needs the repository (services, a browser, helpers): setuptools would ship its
    # test_*.py files alone
    assert not any(n.startswith("tests/") for n in members)


def test_one_version_everywhere() -> None:
    installed = importlib.metadata.version("threadline")
    assert installed == PROJECT["version"] == threadline.__version__
    shown = subprocess.run(
        [str(Path(sys.executable).parent / "threadline"), "--version"], capture_output=True, text=True, timeout=60,
    )
    assert shown.returncode == 0 and installed in shown.stdout.split()
