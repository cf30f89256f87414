"""How fast ``threadline ui`` is on big databases, measured in a real browser.

Usage::

    .venv/bin/python benchmarks/ui.py [--checkpoints 10000] [--threads 100000] [--db PATH]

Builds (or reuses, with ``--db`` of an existing file) a SQLite database holding

* one thread of ``--checkpoints`` checkpoints, written by a real LangGraph graph (a
  counter loop) with branches made by LangGraph time travel (re-running from ten
  earlier checkpoints), and
* ``--threads`` more threads of one to three checkpoints each, written through the
  saver's ``put`` (a real graph would take hours for 100,000 threads),

then serves it with ``threadline ui`` and reports:

* the threads page: server time of the first page, of a page at offset 50,000, of a
  thread_id prefix search and of sorts by size and by checkpoints (median of 5);
* the long thread's branch-graph layout: CPU time in-process (tree query + layout + JSON);
* the long thread in Chromium: the branch graph's layout fetch and drawing time as the
  page itself measures them (``window.tlGraph.timings``: from the script's start to the
  first frame drawn, and from the navigation's start), median of 3 page loads.

Wall times depend on what else the machine runs: compare the load average printed.

Needs Debian's chromium (``apt-get install chromium``).
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import statistics
import sys
import tempfile
import threading
import time
from typing import Annotated, TypedDict

import httpx
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph

from threadline import SqliteSaver
from threadline.web import UIConfig
from threadline.web.layout import lay_out
from threadline.web.queries import tree_op
from threadline.web.server import bind, make_server, url_of

LONG = "long-thread"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


class Counter(TypedDict, total=False):
    n: int
    stop: int
    seen: Annotated[list[int], operator.add]


def tick(state: Counter) -> dict:
    return {"n": state.get("n", 0) + 1, "seen": [state.get("n", 0)] if state.get("n", 0) % 50 == 0 else []}


def counter_graph(saver):
    g = StateGraph(Counter)
    g.add_node("tick", tick)
    g.add_edge(START, "tick")
    g.add_conditional_edges("tick", lambda s: "tick" if s["n"] < s["stop"] else END, ["tick", END])
    return g.compile(checkpointer=saver)


def build(path: str, checkpoints: int, threads: int) -> None:
    with SqliteSaver.from_conn_string(path) as saver:
        graph = counter_graph(saver)
        branches, per_branch = 10, max(1, checkpoints // 100)
        main = checkpoints - branches * (per_branch + 1) - 2
        conf = {"configurable": {"thread_id": LONG}, "recursion_limit": checkpoints * 2}
        t0 = time.perf_counter()
        graph.invoke({"n": 0, "stop": main}, conf)
        history = [s.config for s in graph.get_state_history(conf)]
        for i in range(branches):  # time travel: re-run from an earlier checkpoint, with a new stop
            past = history[len(history) * (i + 1) // (branches + 2)]
            n = graph.get_state(past).values["n"]
            graph.update_state(past, {"stop": n + per_branch})
            graph.invoke(None, {**conf, "configurable": {**conf["configurable"]}})
        print(f"  {LONG}: {sum(1 for _ in saver.list({'configurable': {'thread_id': LONG}}))} checkpoints "
              f"in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        t0 = time.perf_counter()
        for i in range(threads):
            cfg = {"configurable": {"thread_id": f"user-{i % 1000:03d}/session-{i:06d}", "checkpoint_ns": ""}}
            for step in range(1 + i % 3):
                cp = empty_checkpoint()
                cp["channel_values"] = {"n": step}
                cp["channel_versions"] = {"n": step + 1}
                cfg = saver.put(cfg, cp, {"source": "loop", "step": step, "user": f"u{i % 100}"}, {"n": step + 1})
        print(f"  {threads} more threads in {time.perf_counter() - t0:.0f} s", file=sys.stderr)


def timed_get(client: httpx.Client, path: str, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        r = client.get(path)
        times.append((time.perf_counter() - t0) * 1000)
        r.raise_for_status()
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoints", type=int, default=10_000)
    ap.add_argument("--threads", type=int, default=100_000)
    ap.add_argument("--db", help="database file (built when missing)")
    args = ap.parse_args()
    path = args.db or os.path.join(tempfile.mkdtemp(prefix="tl-ui-bench-"), "ui-bench.db")
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    if not os.path.exists(path):
        print(f"building {path}", file=sys.stderr)
        build(path, args.checkpoints, args.threads)

    # CPU time of the branch-graph layout in this process: less sensitive than wall time to
    # other programs sharing the machine
    with SqliteSaver.from_conn_string(path) as saver:
        cpu = []
        for _ in range(3):
            t0 = time.process_time()
            json.dumps(lay_out(saver.run(tree_op(saver.dialect, LONG))))
            cpu.append((time.process_time() - t0) * 1000)
    print(f"branch-graph layout of {LONG!r}, CPU time in-process (median of 3): {statistics.median(cpu):.0f} ms")

    config = UIConfig(db=path, read_only=True)
    sock = bind("127.0.0.1", 0)
    server = make_server(config, sock)
    runner = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    runner.start()
    while not server.started:
        time.sleep(0.05)
    try:
        base = url_of(config).split("/?")[0]
        # httpx resolves names through the system, which may not know *.localhost: connect to
        # loopback and name the UI's host in the Host header
        with httpx.Client(base_url=f"http://127.0.0.1:{config.port}", headers={"host": base.removeprefix("http://")},
                          cookies={config.guard.cookie: config.guard.cookie_value}, timeout=120) as client:
            total = client.get("/api/changes").json()["marker"][1]
            print(f"threads page, {total:,} threads (server time, median of 5):")
            for label, path in (("first page", "/"), ("page at offset 50,000", "/?offset=50000"),
                                ("prefix search user-042/", "/?q=user-042/"), ("glob *-00012?", "/?q=*-00012%3F"),
                                ("sorted by size", "/?sort=size"), ("sorted by checkpoints", "/?sort=checkpoints")):
                print(f"  {label:<28} {timed_get(client, path):7.1f} ms")
            print(f"  {'graph layout JSON (long)':<28} {timed_get(client, f'/api/graph?thread_id={LONG}', 3):7.1f} ms")

        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(url_of(config))
            runs = []
            for _ in range(3):
                page.goto(f"{base}/thread?thread_id={LONG}")
                page.wait_for_selector("#graph[data-ready='1']", timeout=120_000)
                runs.append(page.evaluate("window.tlGraph.timings"))
            browser.close()
        print(f"branch graph of {LONG!r} in Chromium ({runs[0]['checkpoints']:,} checkpoints, {runs[0]['lanes']} lanes), median of 3:")
        for key in ("fetch_ms", "draw_ms", "total_ms", "since_navigation_ms"):
            print(f"  {key:<10} {statistics.median(r[key] for r in runs):7.0f}")
    finally:
        server.should_exit = True
        runner.join(10)
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
