"""The base install and its extras (issue 44), in fresh venvs made by ``uv`` from this checkout's
wheel: the base install runs a SQLite agent, the Store, the Cache and the command's reads; each
missing extra is one line naming ``pip install 'threadline[…]'`` — from the command (exit 2) and
from the library (``MissingExtraError``) — never a traceback; and the footprint of the base
install (and of ``threadline[postgres]``) is within 1.25× of the official savers' installs.

The venvs are made once per session (a few seconds with uv's cache warm); without the network
to fill the cache the tests skip, and fail under CI=true."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from backends import in_ci
from threadline.extras import EXTRAS

ROOT = Path(__file__).resolve().parents[1]
RATIO = 1.25
OFFICIAL = {
    "official-sqlite": ["langgraph", "langgraph-checkpoint-sqlite"],
    "official-postgres": ["langgraph", "langgraph-checkpoint-postgres", "psycopg[binary]", "psycopg-pool"],
}


class Venvs:
    """Fresh venvs by name, made on first use: ``base`` (threadline alone), ``postgres``
    (``threadline[postgres]``) and the official installs of ``OFFICIAL``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
        self.wheel: Path | None = None
        self.made: dict[str, Path] = {}

    def _run(self, *args: str) -> None:
        done = subprocess.run(args, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            reason = f"cannot make a venv ({' '.join(args[:3])}…): {done.stderr.strip()[-400:]}"
            if in_ci():
                pytest.fail(f"CI=true: {reason}", pytrace=False)
            pytest.skip(reason)

    def python(self, name: str) -> Path:
        if name in self.made:
            return self.made[name]
        if self.uv is None:
            (pytest.fail if in_ci() else pytest.skip)("uv is not installed")
        if name in OFFICIAL:
            requirements = OFFICIAL[name]
        else:
            if self.wheel is None:
                self._run(self.uv, "build", "--wheel", "-q", "-o", str(self.root / "dist"), str(ROOT))
                self.wheel = next((self.root / "dist").glob("threadline-*.whl"))
            extra = "" if name == "base" else f"[{name}]"
            requirements = [f"threadline{extra} @ {self.wheel.as_uri()}"]
        venv = self.root / name
        self._run(self.uv, "venv", "-q", "--python", sys.executable, str(venv))
        python = venv / "bin" / "python"
        self._run(self.uv, "pip", "install", "-q", "--python", str(python), *requirements)
        self.made[name] = python
        return python


@pytest.fixture(scope="session")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> Venvs:
    return Venvs(tmp_path_factory.mktemp("venvs"))


def site_bytes(python: Path) -> int:
    """The bytes of the files a venv's packages install (apparent sizes; ``__pycache__`` left
    out: Python writes those as the venv runs, on either side)."""
    (site,) = (python.parent.parent / "lib").glob("python3*/site-packages")
    total = 0
    for folder, dirs, files in os.walk(site):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        total += sum((Path(folder) / f).stat().st_size for f in files)
    return total


@pytest.mark.parametrize(("ours", "official"), [("base", "official-sqlite"), ("postgres", "official-postgres")])
def test_footprint_within_a_quarter_of_the_official_install(venvs: Venvs, ours: str, official: str) -> None:
    """``pip install threadline`` ≤ 1.25× ``pip install langgraph langgraph-checkpoint-sqlite``,
    and ``threadline[postgres]`` ≤ 1.25× the official Postgres saver with psycopg[binary] and
    its pool (issue 44: the extras keep pyarrow, duckdb, cryptography, … out of the base)."""
    mine, theirs = site_bytes(venvs.python(ours)), site_bytes(venvs.python(official))
    print(f"\n{ours}: {mine / 1e6:.1f} MB; {official}: {theirs / 1e6:.1f} MB; ratio {mine / theirs:.2f}")
    assert mine <= RATIO * theirs, f"{ours} installs {mine / 1e6:.1f} MB, {mine / theirs:.2f}× {official}'s {theirs / 1e6:.1f} MB"


# Run in the base venv: what works without any extra, and the line each missing extra gives.
LIBRARY = textwrap.dedent(
    """
    import json, os, sys, tempfile
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    import threadline
    from threadline import MissingExtraError, SqliteCache, SqliteSaver, SqliteStore, open_saver

    folder, db = sys.argv[1], sys.argv[2]
    found = {}

    class State(TypedDict):
        count: int

    graph = StateGraph(State)
    graph.add_node("step", lambda s: {"count": s["count"] + 1})
    graph.add_edge(START, "step")
    graph.add_edge("step", END)
    with SqliteSaver.from_conn_string(db) as saver:
        app = graph.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "t1"}}
        app.invoke({"count": 1}, config)
        found["state"] = app.get_state(config).values

    def vector(texts):  # the application's embedding function: letters counted
        return [[t.count(c) / (len(t) or 1) for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts]

    with SqliteStore.from_conn_string(db, index={"dims": 26, "embed": vector, "fields": ["text"]}) as store:
        store.setup()
        store.put(("notes",), "a", {"text": "aaaa apples"})
        store.put(("notes",), "z", {"text": "zzz buzz"})
        found["search"] = [item.key for item in store.search(("notes",), query="aaa", limit=2)]
    with SqliteCache.from_conn_string(db) as cache:
        cache.set({(("n",), "k"): ({"v": 1}, 60)})
        found["cache"] = cache.get([(("n",), "k")])[(("n",), "k")]

    def attempt(name, fn):
        try:
            fn()
            found[name] = "no error"
        except MissingExtraError as exc:
            found[name] = [str(exc), exc.extra, isinstance(exc, ImportError)]

    def entered(cm):
        with cm:
            pass

    def imported(module):
        __import__(module)

    from threadline.transfer.export import export_parquet

    def export():
        with SqliteSaver.from_conn_string(db) as saver:
            export_parquet(saver, os.path.join(folder, "out"))

    attempt("PostgresSaver", lambda: threadline.PostgresSaver)
    attempt("RedisSaver", lambda: threadline.RedisSaver)
    attempt("PostgresStore", lambda: threadline.PostgresStore)
    attempt("PostgresCache", lambda: threadline.PostgresCache)
    attempt("open_saver postgres", lambda: entered(open_saver("postgresql://postgres@127.0.0.1:1/none")))
    attempt("open_store redis", lambda: entered(threadline.open_store("redis://127.0.0.1:1/0")))
    attempt("web", lambda: imported("threadline.web"))
    attempt("export", export)
    attempt("offload", lambda: entered(open_saver(db, offload="file://" + os.path.join(folder, "objects"))))
    attempt("encryption", lambda: threadline.Keyring([os.urandom(32)]))
    attempt("otel", lambda: __import__("threadline.metrics").metrics.configure())
    print(json.dumps(found))
    """
)


def line(extra: str, feature: str) -> str:
    return f"{feature} needs the {extra} extra: pip install 'threadline[{extra}]'"


def test_the_base_install_works_and_names_each_missing_extra(venvs: Venvs, tmp_path: Path) -> None:
    """In a venv of the base install: a LangGraph graph on SqliteSaver, the Store's vector search
    (the distance functions in Python, without sqlite-vec) and the Cache work; every feature of an
    extra raises MissingExtraError (an ImportError) naming the install command."""
    python = venvs.python("base")
    installed = subprocess.run([str(python), "-c", "import importlib.util as u, json, sys; "
                                f"print(json.dumps({{m: u.find_spec(m) is not None for m in {sorted(m.split('.')[0] for ms in EXTRAS.values() for m in ms)}}}))"],
                               capture_output=True, text=True, check=True)
    assert not any(json.loads(installed.stdout).values()), installed.stdout  # no extra came with the base install
    db = str(tmp_path / "app.db")
    done = subprocess.run([str(python), "-c", LIBRARY, str(tmp_path), db], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found.pop("state") == {"count": 2}
    assert found.pop("search") == ["a", "z"]
    assert found.pop("cache") == {"v": 1}
    backend = {"postgres": "the postgres backend", "redis": "the redis backend"}
    assert found == {
        "PostgresSaver": [line("postgres", "PostgresSaver"), "postgres", True],
        "RedisSaver": [line("redis", "RedisSaver"), "redis", True],
        "PostgresStore": [line("postgres", "PostgresStore"), "postgres", True],
        "PostgresCache": [line("postgres", "PostgresCache"), "postgres", True],
        "open_saver postgres": [line("postgres", backend["postgres"]), "postgres", True],
        "open_store redis": [line("redis", backend["redis"]), "redis", True],
        "web": [line("ui", "the web app (threadline ui)"), "ui", True],
        "export": [line("export", "Parquet export"), "export", True],
        "offload": [line("offload", "offload to an object store"), "offload", True],
        "encryption": [line("encryption", "encryption at rest (a Keyring)"), "encryption", True],
        "otel": [line("otel", "OpenTelemetry metrics"), "otel", True],
    }


def test_the_command_without_extras(venvs: Venvs, tmp_path: Path) -> None:
    """The base install's ``threadline``: --help lists every command (those of the extras too),
    --version names the installed version, the reads work, and each command or URL of a missing
    extra prints one line naming ``pip install 'threadline[…]'`` and exits 2."""
    python = venvs.python("base")
    command = str(python.parent / "threadline")
    db = str(tmp_path / "app.db")
    subprocess.run([str(python), "-c", LIBRARY, str(tmp_path), db], capture_output=True, text=True, check=True, timeout=300)

    def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
        done = subprocess.run([command, *args], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                              env={**os.environ, "COLUMNS": "200", **(env or {})})
        return done.returncode, done.stdout, done.stderr

    code, out, err = run("--help")
    assert code == 0 and not err
    listed = {ln.split()[0] for ln in out.split("Commands:")[1].splitlines() if ln.strip()}
    assert {"threads", "export", "ui", "tier", "store", "rekey"} <= listed
    version = venvs.wheel.name.split("-")[1]
    assert run("--version") == (0, f"threadline {version}\n", "")
    code, out, err = run("threads", "--db", db)
    assert code == 0 and "t1" in out, err

    key = {"THREADLINE_ENCRYPTION_KEY": "11" * 32}
    for args, env, extra, feature in [
        (("threads", "--db", "postgresql://postgres@127.0.0.1:1/none"), None, "postgres", "the postgres backend"),
        (("threads", "--db", "redis://127.0.0.1:1/0"), None, "redis", "the redis backend"),
        (("ui", "--db", db, "--no-browser"), None, "ui", "the web app (threadline ui)"),
        (("export", "--db", db, "--to", str(tmp_path / "out")), None, "export", "Parquet export"),
        (("tier", "--db", db, "--idle", "1d"), {"THREADLINE_OFFLOAD": (tmp_path / "objects").as_uri()}, "offload",
         "offload to an object store"),
        (("threads", "--db", db), key, "encryption", "encryption at rest (a Keyring)"),
    ]:
        code, out, err = run(*args, env=env)
        assert (code, out, err) == (2, "", f"error: {line(extra, feature)}\n"), args


def test_each_extra_named_by_the_code_is_one_of_pyproject() -> None:
    """The extras ``threadline.extras`` requires are those pyproject.toml declares, ``all`` pulls
    every one of them and ``test`` pulls ``all`` (so ``make test`` runs with every extra); ``docs``
    is the documentation site's tooling (``make docs``), no feature of the package."""
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(declared) == set(EXTRAS) | {"all", "test", "docs"}
    (everything,) = declared["all"]
    assert everything == f"threadline[{','.join(EXTRAS)}]"
    assert "threadline[all]" in declared["test"]
