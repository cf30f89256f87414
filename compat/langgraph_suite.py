"""LangGraph suite: run LangGraph's own tests with threadline's savers substituted.

Proves drop-in compatibility by running the official test suites of the
INSTALLED versions of

* ``langgraph`` (its ``tests/``: graph execution against the ``sync_checkpointer``
  / ``async_checkpointer`` fixtures, i.e. SQLite sync/async and Postgres
  sync/async with connection, pipeline and pool variants),
* ``langgraph-checkpoint-sqlite`` (``tests/test_sqlite.py``, ``test_aiosqlite.py``, ...),
* ``langgraph-checkpoint-postgres`` (``tests/test_sync.py``, ``test_async.py``, ...),
* and, as the ``*-store`` suites, the store tests of the same sdists
  (``test_store.py``, ``test_async_store.py``, ``test_ttl.py``) and the langgraph tests
  that take a Postgres store or the SQLite cache, with threadline's stores and cache,
* and, as the ``langgraph-redis`` suite, the langgraph tests of the SQLite checkpointer
  variants with threadline's ``RedisSaver`` / ``AsyncRedisSaver`` on plain Redis in the
  threadline run (the official run: the official SQLite savers, since the official Redis
  saver needs RediSearch),

twice each: once with the official savers (the baseline) and once with
``langgraph.checkpoint.sqlite.SqliteSaver`` & co. replaced by
``threadline.SqliteSaver`` & co. It then prints, per suite and saver variant,
passed/failed/skipped/errors for official vs threadline, and every test that
passes with the official saver but not with threadline, with the first line of
its failure and its classification from ``compat/suite/expectations.toml``.

How:

1. The sdist of each package, at the version installed in this environment
   (``importlib.metadata``), is fetched with ``pip download --no-deps
   --no-binary :all:`` into ``.cache/langgraph-suite/sdists/`` and only its
   ``tests/`` folder is extracted to ``.cache/langgraph-suite/<name>-<version>/``
   (git-ignored; downloaded code is never committed nor edited).
2. pytest runs there with ``-c compat/suite/pytest.ini -p threadline_suite_plugin``
   (``compat/suite/threadline_suite_plugin.py``): the plugin substitutes the saver
   classes before any test module is imported, points the suites' hard-coded
   Postgres URIs at ``THREADLINE_TEST_POSTGRES``, selects the tests that exercise a
   substituted saver, times out hung tests and writes per-test results as JSON.
   Runs go two at a time (``--jobs``).
3. Results, logs and a Markdown report land in ``.cache/langgraph-suite/results/``;
   ``--write-docs`` also puts the counts table into ``docs/compatibility.md``.

Usage::

    make langgraph-suite                       # everything, both runs of each suite
    make langgraph-suite SUITE_ARGS=--quick    # langgraph suite: base variants only
    .venv/bin/python compat/langgraph_suite.py --suite sqlite --suite postgres
    .venv/bin/python compat/langgraph_suite.py --suite langgraph -k test_pregel.py
    .venv/bin/python compat/langgraph_suite.py --impl threadline  # reuse the official results
    .venv/bin/python compat/langgraph_suite.py --rev HEAD    # a committed threadline
    .venv/bin/python compat/langgraph_suite.py --report-only --write-docs

Postgres: ``THREADLINE_TEST_POSTGRES`` (default
``postgresql://postgres@127.0.0.1:5432/test``); the role must be allowed to
CREATE DATABASE (the suites make one per test). ``--no-postgres`` skips it.
Redis (the ``redis-store``, ``redis-sqlite-store`` and ``langgraph-redis`` suites):
``THREADLINE_TEST_REDIS`` (default ``redis://127.0.0.1:6379/0``); every store and saver
there has a key prefix of its own (``tlsuite:…``), deleted when it closes.

A threadline-only failure that is not explained there is rerun once, alone
(``--no-rerun`` to skip): one that passes then is reported as timing-sensitive.

Exit status: 0 when every threadline-only failure is classified ``internals`` or
``deliberate`` in the expectations file or passed when rerun, 1 otherwise (``bug``
or unclassified), 2 when a run could not produce results.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from suite_report import DOCS, IMPLS, OUTCOMES, compare, load_expectations, print_console, report_markdown, write_docs
from suites import ALL_VARIANTS, QUICK_VARIANTS, SUITE_VARIANTS, SUITES, Suite, log

ROOT = Path(__file__).resolve().parent.parent
COMPAT = ROOT / "compat" / "suite"
DEFAULT_CACHE = ROOT / ".cache" / "langgraph-suite"
DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"



# --- fetching the suites ---------------------------------------------------------------


def installed_version(dist: str) -> str:
    return importlib.metadata.version(dist)


def fetch_tests(suite: Suite, cache: Path, offline: bool) -> Path:
    """Download the sdist of the installed ``suite.dist`` and extract its tests/; return the folder holding tests/."""
    version = installed_version(suite.dist)
    dest = cache / f"{suite.dist}-{version}"
    stamp = dest / ".extracted"
    if stamp.exists():
        return dest
    sdists = cache / "sdists"
    sdists.mkdir(parents=True, exist_ok=True)
    prefix = suite.dist.replace("-", "_")
    archive = next(
        (p for p in sdists.glob("*.tar.gz") if p.name.lower() in (f"{prefix}-{version}.tar.gz", f"{suite.dist}-{version}.tar.gz")),
        None,
    )
    if archive is None:
        if offline:
            raise SystemExit(f"--offline: no sdist of {suite.dist}=={version} in {sdists}")
        log(f"fetching sdist {suite.dist}=={version} from PyPI")
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
               f"{suite.dist}=={version}", "-d", str(sdists)]
        subprocess.run(cmd, check=True)
        archive = next(p for p in sdists.glob("*.tar.gz") if p.name.lower() in (f"{prefix}-{version}.tar.gz", f"{suite.dist}-{version}.tar.gz"))
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tarfile.open(archive) as tar:
        members = []
        for m in tar.getmembers():
            parts = Path(m.name).parts
            if len(parts) >= 2 and parts[1] == "tests":
                m.name = str(Path(*parts[1:]))
                members.append(m)
        if not members:
            raise SystemExit(f"{archive.name} has no tests/ folder")
        tar.extractall(dest, members=members, filter="data")
    stamp.write_text(f"{archive.name}\n")
    return dest


# --- threadline under test -------------------------------------------------------------------


def threadline_source(rev: str | None, cache: Path) -> tuple[str | None, str]:
    """(extra PYTHONPATH entry, description) of the threadline code to test."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout.strip()

    if rev is None:
        try:
            desc = git("describe", "--always", "--dirty")
        except (subprocess.CalledProcessError, FileNotFoundError):
            desc = "unknown"
        return None, f"working tree ({desc})"
    sha = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    dest = cache / "threadline" / sha[:12]
    if not (dest / "src" / "threadline" / "__init__.py").exists():
        dest.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", sha, "src"], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return str(dest / "src"), f"git {rev} ({sha[:12]})"


def base_env(pythonpath_extra: str | None) -> dict[str, str]:
    env = dict(os.environ)
    paths = [p for p in (pythonpath_extra, str(COMPAT)) if p]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.setdefault("THREADLINE_TEST_POSTGRES", DEFAULT_DSN)
    env["PYTHONUNBUFFERED"] = "1"  # the logs show progress as it happens
    env.pop("NO_DOCKER", None)  # the langgraph suite must keep its Postgres variants
    return env


def check_import(env: dict[str, str], module: str) -> str | None:
    proc = subprocess.run([sys.executable, "-c", f"import {module}"], env=env, capture_output=True, text=True)
    if proc.returncode == 0:
        return None
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else f"import {module} failed"


def check_redis(url: str) -> str | None:
    try:
        import redis

        client = redis.Redis.from_url(url, socket_connect_timeout=5)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:
        return " ".join(str(exc).split())
    return None


def check_postgres(dsn: str) -> str | None:
    try:
        import psycopg

        with psycopg.Connection.connect(dsn, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
        return None
    except Exception as exc:  # noqa: BLE001 - any reason is reported
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


# --- running ------------------------------------------------------------------------------


@dataclass
class Run:
    suite: Suite
    impl: str
    cwd: Path
    results: Path
    log: Path
    data: dict | None = None
    problem: str | None = None
    seconds: float = 0.0


def run_pytest(run: Run, env: dict[str, str], args: argparse.Namespace, description: str) -> Run:
    env = dict(env)
    env.update(
        THREADLINE_SUITE=run.suite.name,
        THREADLINE_SUITE_IMPL=run.impl,
        THREADLINE_SUITE_RESULTS=str(run.results),
        THREADLINE_SUITE_TIMEOUT=str(args.timeout),
        THREADLINE_SUITE_NO_POSTGRES="1" if args.no_postgres else "",
        THREADLINE_SUITE_VARIANTS=",".join(args.variants or ()),
    )
    cmd = [
        sys.executable, "-m", "pytest", "tests",
        "-c", str(COMPAT / "pytest.ini"), "--rootdir", str(run.cwd),
        "-q", "-p", "no:cacheprovider", "-p", "threadline_suite_plugin",
        "--tb=short", "-rN", *run.suite.options,
    ]
    if args.k:
        cmd += ["-k", args.k]
    run.results.unlink(missing_ok=True)
    started = time.time()
    log(f"[{run.suite.name}/{run.impl}] started")
    with run.log.open("w") as out:
        out.write("$ " + " ".join(cmd) + "\n\n")
        out.flush()
        try:
            subprocess.run(cmd, cwd=run.cwd, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=args.run_timeout)
        except subprocess.TimeoutExpired:
            run.problem = f"pytest did not finish within {args.run_timeout}s"
    run.seconds = time.time() - started
    if run.results.exists():
        run.data = json.loads(run.results.read_text())
        run.data["selection"] = selection(run.suite, args)
        run.data["date"] = time.strftime("%Y-%m-%d %H:%M")
        if run.impl == "threadline":
            run.data["threadline_source"] = description
        run.results.write_text(json.dumps(run.data, indent=1, sort_keys=True))
    elif run.problem is None:
        tail = run.log.read_text().strip().splitlines()[-5:]
        run.problem = "no results; log ends: " + " | ".join(tail)
    counts = Counter(t["outcome"] for t in (run.data or {}).get("tests", {}).values())
    log(f"[{run.suite.name}/{run.impl}] done in {run.seconds:.0f}s: "
        + (", ".join(f"{counts[o]} {o}" for o in OUTCOMES) if run.data else f"FAILED ({run.problem})"))
    return run


def rerun_failures(run: Run, nodeids: list[str], env: dict[str, str], args: argparse.Namespace) -> None:
    """Run ``nodeids`` (threadline-only failures) once more, alone, and record their outcomes in
    ``run.data["reruns"]``: one that passes now is timing-sensitive (flaky), not a difference."""
    env = dict(env)
    out_json = run.results.with_name(run.results.stem + "-rerun.json")
    env.update(
        THREADLINE_SUITE=run.suite.name,
        THREADLINE_SUITE_IMPL=run.impl,
        THREADLINE_SUITE_RESULTS=str(out_json),
        THREADLINE_SUITE_TIMEOUT=str(args.timeout),
        THREADLINE_SUITE_NO_POSTGRES="1" if args.no_postgres else "",
        THREADLINE_SUITE_VARIANTS=",".join(args.variants or ()),
    )
    cmd = [
        sys.executable, "-m", "pytest", *nodeids,
        "-c", str(COMPAT / "pytest.ini"), "--rootdir", str(run.cwd),
        "-q", "-p", "no:cacheprovider", "-p", "threadline_suite_plugin",
        "--tb=short", "-rN", *run.suite.options,
    ]
    out_json.unlink(missing_ok=True)
    log(f"[{run.suite.name}/{run.impl}] rerunning {len(nodeids)} unexplained failure(s) alone")
    with run.log.with_name(run.log.stem + "-rerun.log").open("w") as out:
        try:
            subprocess.run(cmd, cwd=run.cwd, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=args.run_timeout)
        except subprocess.TimeoutExpired:
            pass
    tests = json.loads(out_json.read_text()).get("tests", {}) if out_json.exists() else {}
    assert run.data is not None
    run.data["reruns"] = {n: {"outcome": tests.get(n, {}).get("outcome", "not run"),
                              "message": tests.get(n, {}).get("message", "")} for n in nodeids}
    run.results.write_text(json.dumps(run.data, indent=1, sort_keys=True))
    flaky = sum(1 for r in run.data["reruns"].values() if r["outcome"] == "passed")
    log(f"[{run.suite.name}/{run.impl}] rerun: {flaky} of {len(nodeids)} passed (timing-sensitive)")


def selection(suite: Suite, args: argparse.Namespace) -> dict:
    """What decides which tests a run ran: results with the same selection can stand in for a rerun."""
    return {
        "version": installed_version(suite.dist),
        "k": args.k,
        "no_postgres": bool(args.no_postgres),
        "variants": sorted(args.variants or ()) if suite.name in SUITE_VARIANTS else None,
    }


def reuse(run: Run, args: argparse.Namespace) -> bool:
    """Load an earlier run's results for a run not asked for this time (e.g. the official
    baseline while iterating on threadline), if they were made with the same selection."""
    if not run.results.exists():
        return False
    try:
        data = json.loads(run.results.read_text())
    except ValueError:
        return False
    if data.get("selection") != selection(run.suite, args) or data.get("impl") != run.impl:
        return False
    run.data = data
    log(f"[{run.suite.name}/{run.impl}] reusing the results of an earlier run ({run.results.name})")
    return True


# --- main -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", action="append", choices=list(SUITES), help="suite(s) to run (default: all)")
    p.add_argument("--impl", action="append", choices=IMPLS, help="official and/or threadline (default: both)")
    p.add_argument("-k", help="pytest -k expression, passed to every run")
    p.add_argument("--rev", help="test threadline as committed at this git revision instead of the working tree")
    p.add_argument("--no-postgres", action="store_true", help="deselect every Postgres variant")
    p.add_argument("--variants", type=lambda s: [v for v in s.split(",") if v],
                   help="langgraph and langgraph-redis suites: comma-separated saver variants to run (default all: "
                   + ",".join(ALL_VARIANTS) + ")")
    p.add_argument("--quick", action="store_true",
                   help="langgraph suites: only " + ",".join(QUICK_VARIANTS) + " (no pipeline/pool/encrypted variants)")
    p.add_argument("--jobs", type=int, default=2, help="pytest runs at once (default 2)")
    p.add_argument("--timeout", type=float, default=120, help="seconds one test phase may take (default 120)")
    p.add_argument("--run-timeout", type=float, default=5400, help="seconds one pytest run may take (default 5400)")
    p.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE, help=f"default {DEFAULT_CACHE.relative_to(ROOT)}")
    p.add_argument("--offline", action="store_true", help="use cached sdists only")
    p.add_argument("--no-rerun", action="store_true",
                   help="do not rerun unexplained threadline-only failures alone to spot timing-sensitive tests")
    p.add_argument("--report-only", action="store_true",
                   help="run nothing: compare the results of earlier runs (same selection) and report")
    p.add_argument("--write-docs", action="store_true", help=f"put the results into {DOCS.relative_to(ROOT)}")
    args = p.parse_args(argv)
    if args.quick:
        args.variants = list(QUICK_VARIANTS)
    if args.variants and (unknown := set(args.variants) - set(ALL_VARIANTS)):
        p.error(f"unknown variants {sorted(unknown)}; known: {', '.join(ALL_VARIANTS)}")

    suites = [SUITES[s] for s in (args.suite or list(SUITES))]
    impls = args.impl or list(IMPLS)
    cache: Path = args.cache_dir.resolve()
    results_dir = cache / "results"
    results_dir.mkdir(parents=True, exist_ok=True)

    extra, description = threadline_source(args.rev, cache)
    env = base_env(extra)
    dsn = env["THREADLINE_TEST_POSTGRES"]
    if not args.no_postgres and not args.report_only and (problem := check_postgres(dsn)):
        log(f"Postgres at THREADLINE_TEST_POSTGRES is not usable ({problem}); start it or pass --no-postgres")
        return 2
    if args.no_postgres:
        suites = [s for s in suites if s.name not in ("postgres", "postgres-store")]
    redis_url = env.setdefault("THREADLINE_TEST_REDIS", "redis://127.0.0.1:6379/0")
    if any(s.redis for s in suites) and not args.report_only and (problem := check_redis(redis_url)):
        log(f"Redis at THREADLINE_TEST_REDIS is not usable ({problem}); start it or leave out the Redis suites "
            + "(" + ", ".join(s.name for s in SUITES.values() if s.redis) + ")")
        return 2
    for suite in suites:
        for module in suite.needs:
            if problem := check_import(env, module):
                log(f"the {suite.name} suite needs {module} ({problem}): pip install -e '.[test]'")
                return 2
    if "threadline" in impls and not args.report_only and (problem := check_import(env, "threadline")):
        log(f"threadline ({description}) does not import: {problem}")
        return 2

    runs: dict[tuple[str, str], Run] = {}
    todo: list[Run] = []
    for suite in suites:
        cwd = fetch_tests(suite, cache, args.offline)
        for impl in IMPLS:
            run = Run(suite, impl, cwd, results_dir / f"{suite.name}-{impl}.json", results_dir / f"{suite.name}-{impl}.log")
            if impl in impls and not args.report_only:
                runs[(suite.name, impl)] = run
                todo.append(run)
            elif reuse(run, args):
                runs[(suite.name, impl)] = run
    started = time.time()
    # Longest runs first so that two jobs finish close together.
    order = sorted(todo, key=lambda r: (r.suite.name not in SUITE_VARIANTS, r.impl))
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(lambda r: run_pytest(r, env, args, description), order))

    meta = {
        "date": time.strftime("%Y-%m-%d"),
        "threadline": "; ".join(sorted({r.data.get("threadline_source", "?") for (_, impl), r in runs.items()
                                          if impl == "threadline" and r.data})) or description,
        "versions": {s.dist: installed_version(s.dist) for s in suites},
        "seconds": time.time() - started,
        "runs": {f"{name}/{impl}": (r.data.get("seconds", 0), r.data.get("date", "?"))
                 for (name, impl), r in runs.items() if r.data},
    }
    expectations = load_expectations()
    cmp = compare(runs, expectations)
    if not args.no_rerun and not args.report_only:
        for (name, impl), run in runs.items():
            prefix = f"{name}: "
            todo_ids = [r.test_id[len(prefix):] for r in cmp.regressions
                        if r.test_id.startswith(prefix) and r.rerun is None and r.unexplained]
            if impl == "threadline" and run.data and todo_ids and run in todo:
                rerun_failures(run, todo_ids, env, args)
        cmp = compare(runs, expectations)
    print_console(cmp, meta)
    report = results_dir / "report.md"
    report.write_text("# LangGraph suite report\n\n" + report_markdown(cmp, meta, full=True) + "\n")
    log(f"\nfull report: {report.relative_to(ROOT) if report.is_relative_to(ROOT) else report}; logs and JSON beside it")
    if args.write_docs:
        write_docs(report_markdown(cmp, meta, full=False))

    if any(r.problem for r in runs.values()):
        for r in runs.values():
            if r.problem:
                log(f"{r.suite.name}/{r.impl}: {r.problem}")
        return 2
    unexplained = [r for r in cmp.regressions if r.unexplained]
    flaky = [r for r in cmp.regressions if r.flaky]
    log(f"threadline-only failures: {len(cmp.regressions)}, of which bug or unclassified: {len(unexplained)}"
        + (f" (and {len(flaky)} that passed when rerun alone)" if flaky else ""))
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
