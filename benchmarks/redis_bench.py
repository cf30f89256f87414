"""threadline's RedisSaver against the AWS ``ValkeySaver`` (``langgraph-checkpoint-aws``, the
saver that runs on plain Redis/Valkey), on the same server, same workload, same run.

Usage::

    .venv/bin/python benchmarks/redis_bench.py [--threads 20] [--turns 20] [--url redis://127.0.0.1:6379]

Workload: a real LangGraph chat graph (``MessagesState``), ``--threads`` threads × ``--turns``
turns, each turn a user message and an AI reply of ~300 bytes of text, run sequentially, the
two savers interleaved turn by turn (the order alternating), so a change of load on the machine
weighs on both alike. Per saver:

* put+put_writes ms per turn: the saver's own methods, timed around each call (wall: median
  and mean; the CPU of the calling thread in those calls: mean);
* get-latest ms: ``get_tuple`` of each thread's latest checkpoint by a NEW saver (nothing cached), median;
* memory: ``MEMORY USAGE`` summed over every key the saver wrote, per thread, and ÷ the raw
  bytes (each thread's final messages as LangGraph's serializer writes them).

Each saver writes into a Redis database number of its own (14 and 15), emptied first: this
bench's keys only.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Callable
from typing import Any

import redis
from langchain_core.messages import AIMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, MessagesState, StateGraph

TEXT = ("The policy covers water damage from burst pipes but not gradual leaks; " * 5)[:300]


def graph() -> StateGraph:
    def reply(state: MessagesState) -> dict:
        return {"messages": [AIMessage(content=f"{len(state['messages'])}: {TEXT}")]}

    b = StateGraph(MessagesState)
    b.add_node("reply", reply)
    b.add_edge(START, "reply")
    b.add_edge("reply", END)
    return b


def timed(saver: Any, names: tuple[str, ...], into: list[tuple[float, float]]) -> None:
    """Time every call of ``names`` on ``saver``: (wall, CPU of the calling thread) in seconds, summed
    per turn by the caller."""
    for name in names:
        original = getattr(saver, name)

        def wrapper(*a: Any, _f: Callable = original, **k: Any) -> Any:
            t, c = time.perf_counter(), time.thread_time()
            try:
                return _f(*a, **k)
            finally:
                into.append((time.perf_counter() - t, time.thread_time() - c))

        setattr(saver, name, wrapper)


def memory(client: redis.Redis) -> int:
    return sum(client.memory_usage(k, samples=0) or 0 for k in client.scan_iter(count=1000))


def run(savers: dict[str, tuple[Callable[[], Any], redis.Redis]], threads: int, turns: int) -> dict[str, dict[str, float]]:
    """The workload on every saver, interleaved turn by turn (the order alternating), so a change
    of load on the machine weighs on each saver alike."""
    serde = JsonPlusSerializer()
    names = list(savers)
    stack = contextlib.ExitStack()
    graphs, calls = {}, {}
    for name, (opener, client) in savers.items():
        client.flushdb()
        saver = stack.enter_context(opener())
        calls[name] = []
        timed(saver, ("put", "put_writes"), calls[name])
        graphs[name] = graph().compile(checkpointer=saver)
    walls: dict[str, list[float]] = {n: [] for n in names}
    cpus: dict[str, list[float]] = {n: [] for n in names}
    raw = 0
    with stack:
        for t in range(threads):
            config = {"configurable": {"thread_id": f"bench-{t}"}}
            for turn in range(turns):
                for name in names if (t + turn) % 2 == 0 else names[::-1]:
                    calls[name].clear()
                    graphs[name].invoke({"messages": [("user", f"question {turn}: {TEXT[:120]}")]}, config)
                    walls[name].append(sum(w for w, _ in calls[name]) * 1000)
                    cpus[name].append(sum(c for _, c in calls[name]) * 1000)
            raw += len(serde.dumps_typed(graphs[names[0]].get_state(config).values["messages"])[1])
    gets: dict[str, list[float]] = {n: [] for n in names}
    with contextlib.ExitStack() as fresh_stack:
        fresh = {name: fresh_stack.enter_context(opener()) for name, (opener, _) in savers.items()}
        for t in range(threads):
            for name in names if t % 2 == 0 else names[::-1]:
                start = time.perf_counter()
                fresh[name].get_tuple({"configurable": {"thread_id": f"bench-{t}"}})
                gets[name].append((time.perf_counter() - start) * 1000)
    results = {}
    for name, (_, client) in savers.items():
        used = memory(client)
        results[name] = {
            "put+put_writes ms/turn (median)": statistics.median(walls[name]),
            "put+put_writes ms/turn (mean)": statistics.fmean(walls[name]),
            "put+put_writes CPU ms/turn (mean)": statistics.fmean(cpus[name]),
            "get-latest ms": statistics.median(gets[name]),
            "memory KB/thread": used / threads / 1024,
            "memory ÷ raw": used / raw,
        }
    return results


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=20)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--url", default="redis://127.0.0.1:6379")
    args = ap.parse_args()
    from langgraph_checkpoint_aws import ValkeySaver

    from threadline import RedisSaver

    clients = {db: redis.Redis.from_url(f"{args.url}/{db}") for db in (14, 15)}
    results = run(
        {
            "ValkeySaver (AWS)": (lambda: ValkeySaver.from_conn_string(f"{args.url}/14"), clients[14]),
            "threadline RedisSaver": (lambda: RedisSaver.from_conn_string(f"{args.url}/15"), clients[15]),
        },
        args.threads,
        args.turns,
    )
    for client in clients.values():
        client.flushdb()
    names = list(results)
    print(f"Redis savers, {args.threads} threads × {args.turns} turns (chat graph, ~300-byte messages), one server")
    print(f"| figure | {' | '.join(names)} | threadline ÷ Valkey |")
    print("|---|" + "---|" * (len(names) + 1))
    for figure in results[names[0]]:
        a, b = results[names[0]][figure], results[names[1]][figure]
        print(f"| {figure} | {a:.3f} | {b:.3f} | {b / a:.3f} |")


if __name__ == "__main__":
    main()
