"""The supported range tested at both ends (`make test-ends`), each in a fresh venv:

* lowest: the oldest supported Python with the lowest LangGraph, langgraph-checkpoint and
  langchain-core that pyproject.toml's floors allow together (resolved, not assumed: a floor
  another floor overrules is reported as the version installed);
* newest: the newest supported Python with the newest releases.

Each venv gets threadline built from this checkout (a wheel, not the source tree) with every
extra but `test`, the few test tools the subset imports, and runs a representative subset of
the suite: LangGraph's conformance suite, real graphs (interrupts, subgraphs, forks), the
drop-in tests, side by side with the official savers, a prebuilt ReAct agent. It needs
Postgres and Redis as `make test` does. Venvs in .cache/ends/, made anew each run.

usage: .venv/bin/python compat/ends.py [--end lowest|newest] [-- PYTEST_ARGS...]
Exit status: 0 when every end passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "ends"
# (Python, uv's resolution of the three LangGraph packages)
ENDS = {"lowest": ("3.11", "lowest-direct"), "newest": ("3.13", "highest")}
LANGGRAPH = ("langgraph", "langgraph-checkpoint", "langchain-core")
TOOLS = ("pytest", "pytest-asyncio", "hypothesis", "langgraph-checkpoint-conformance",
         "langgraph-checkpoint-sqlite", "langgraph-checkpoint-postgres")
SUBSET = ("tests/test_conformance.py", "tests/test_langgraph.py", "tests/test_drop_in.py",
          "tests/test_side_by_side.py", "tests/test_fast_lists.py")
SHOWN = ("langgraph", "langgraph-checkpoint", "langchain-core", "langgraph-prebuilt",
         "langgraph-checkpoint-sqlite", "langgraph-checkpoint-postgres", "psycopg", "redis")


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _named(requirements: list[str], names: tuple[str, ...]) -> list[str]:
    wanted = {canonicalize_name(n) for n in names}
    return [r for r in requirements if canonicalize_name(Requirement(r).name) in wanted]


def _run(*cmd: str | Path, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], check=True, text=True, **kw)


def _uv() -> str:
    beside = Path(sys.executable).parent / "uv"
    found = str(beside) if beside.exists() else shutil.which("uv")
    if not found:
        sys.exit("compat/ends.py: uv not found (make .venv/.runtime installs it into .venv)")
    return found


def _interpreter(version: str) -> str:
    """A python`version` that runs: on PATH (a pyenv shim runs only for pyenv's active
    versions), else the newest of pyenv's installed ones."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    installed = sorted(pyenv.glob(f"{version}.*/bin/python{version}"),
                       key=lambda p: [int(x) for x in p.parts[-3].split(".") if x.isdigit()])
    for candidate in [shutil.which(f"python{version}"), *map(str, reversed(installed))]:
        if candidate and subprocess.run([candidate, "-c", ""], capture_output=True).returncode == 0:
            return candidate
    sys.exit(f"compat/ends.py: no python{version} found (pyenv install {version}, or apt-get install python{version})")


def _venv(end: str) -> Path:
    """A fresh venv of `end` with threadline and the subset's tools installed."""
    python, resolution = ENDS[end]
    uv, project, venv = _uv(), _project(), CACHE / end
    _run(uv, "venv", "-q", "--clear", "--python", _interpreter(python), venv)
    pins = _run(
        uv, "pip", "compile", "-q", "--no-header", "--no-annotate", "--python", venv / "bin" / "python",
        "--resolution", resolution, "-", input="\n".join(_named(project["dependencies"], LANGGRAPH)),
        capture_output=True,
    ).stdout
    constraints = venv / "langgraph-pins.txt"
    constraints.write_text("".join(line + "\n" for line in pins.splitlines() if line and _named([line], LANGGRAPH)))
    extras = ",".join(sorted(set(project.get("optional-dependencies", {})) - {"test"}))
    # --reinstall-package: uv keeps a local project's build until pyproject.toml changes
    _run(uv, "pip", "install", "-q", "--reinstall-package", "threadline", "--python", venv / "bin" / "python",
         "-c", constraints, f"threadline[{extras}] @ {ROOT.as_uri()}",
         *_named(project["optional-dependencies"]["test"], TOOLS))
    return venv


def _versions(venv: Path) -> str:
    code = ("import importlib.metadata as m, sys; print('Python ' + sys.version.split()[0], "
            f"*(f'{{n}} {{m.version(n)}}' for n in {SHOWN!r}), sep=', ')")
    return _run(venv / "bin" / "python", "-c", code, capture_output=True).stdout.strip()


def _test(venv: Path, pytest_args: list[str]) -> tuple[int, str]:
    """Run the subset in `venv` (output streamed); (exit code, pytest's closing line)."""
    proc = subprocess.Popen(
        [venv / "bin" / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", *SUBSET, *pytest_args],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    last = ""
    for line in proc.stdout:
        print(line, end="", flush=True)
        last = line.strip() or last
    return proc.wait(), last


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--end", choices=ENDS, action="append", help="one end only (repeatable; default both)")
    parser.add_argument("pytest_args", nargs="*", help="after --: more pytest arguments (-x, -k …)")
    args = parser.parse_args()
    results = []
    for end in args.end or ENDS:
        print(f"== {end}: installing", flush=True)
        try:
            venv = _venv(end)
            versions = _versions(venv)
        except subprocess.CalledProcessError as e:  # uv said why (a floor that cannot resolve)
            print(e.stderr or "", file=sys.stderr)
            setup = " ".join(map(str, e.cmd[:3]))
            results.append((end, "", e.returncode, f"could not set up: {setup} exited {e.returncode}"))
            continue
        print(f"== {end}: {versions}", flush=True)
        code, summary = _test(venv, args.pytest_args)
        results.append((end, versions, code, summary))
    print("\n== results")
    for end, versions, code, summary in results:
        print(f"{end:7} {'ok' if code == 0 else 'FAILED':6} {summary}\n        {versions}")
    return 0 if all(code == 0 for _, _, code, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
