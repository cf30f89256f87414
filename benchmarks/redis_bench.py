"""threadline's RedisSaver against the AWS ``ValkeySaver`` (``langgraph-checkpoint-aws``, the
saver that runs on plain Redis/Valkey), on the same server, same workload, same run.

Usage::

    .venv/bin/python benchmarks/redis_bench.py [--threads 20] [--turns 20] [--url redis://127.0.0.1:6379]

Workload: a real LangGraph chat graph (``MessagesState``), ``--threads`` threads × ``--turns``
turns, each turn a user message and an AI reply of ~300 bytes of text, run sequentially.
Per saver:

* put+put_writes ms per turn (the saver's own methods, timed around each call; median) and
  the CPU of this process per turn;
* get-latest ms: ``get_tuple`` of each thread's latest checkpoint by a NEW saver (nothing cached), median;
* memory: ``MEMORY USAGE`` summed over every key the saver wrote, per thread, and ÷ the raw
  bytes (each thread's final messages as LangGraph's serializer writes them).

Each saver writes into a Redis database number of its own (14 and 15), emptied first: this
bench's keys only.
"""

from __future__ import annotations

import argparse
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


def timed(saver: Any, names: tuple[str, ...], into: list[float]) -> None:
    """Time every call of ``names`` on ``saver`` (seconds, summed per turn by the caller)."""
    for name in names:
        original = getattr(saver, name)

        def wrapper(*a: Any, _f: Callable = original, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return _f(*a, **k)
            finally:
                into.append(time.perf_counter() - t)

        setattr(saver, name, wrapper)


def memory(client: redis.Redis) -> int:
    return sum(client.memory_usage(k, samples=0) or 0 for k in client.scan_iter(count=1000))


def run(name: str, open_saver: Callable[[], Any], client: redis.Redis, threads: int, turns: int) -> dict[str, float]:
    client.flushdb()
    serde = JsonPlusSerializer()
    put_ms: list[float] = []
    cpu = time.process_time()
    raw = 0
    with open_saver() as saver:
        g = graph().compile(checkpointer=saver)
        for t in range(threads):
            config = {"configurable": {"thread_id": f"bench-{t}"}}
            for turn in range(turns):
                calls: list[float] = []
                timed(saver, ("put", "put_writes"), calls)
                g.invoke({"messages": [("user", f"question {turn}: {TEXT[:120]}")]}, config)
                put_ms.append(sum(calls) * 1000)
                for n in ("put", "put_writes"):
                    delattr(saver, n)
            raw += len(serde.dumps_typed(g.get_state(config).values["messages"])[1])
    cpu = (time.process_time() - cpu) * 1000 / (threads * turns)
    gets = []
    with open_saver() as fresh:
        for t in range(threads):
            start = time.perf_counter()
            fresh.get_tuple({"configurable": {"thread_id": f"bench-{t}"}})
            gets.append((time.perf_counter() - start) * 1000)
    used = memory(client)
    return {
        "put+put_writes ms/turn": statistics.median(put_ms),
        "CPU ms/turn": cpu,
        "get-latest ms": statistics.median(gets),
        "memory KB/thread": used / threads / 1024,
        "memory ÷ raw": used / raw,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=20)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--url", default="redis://127.0.0.1:6379")
    args = ap.parse_args()
    from langgraph_checkpoint_aws import ValkeySaver

    from threadline import RedisSaver

    results = {}
    for name, db, opener in (
        ("ValkeySaver (AWS)", 14, lambda: ValkeySaver.from_conn_string(f"{args.url}/14")),
        ("threadline RedisSaver", 15, lambda: RedisSaver.from_conn_string(f"{args.url}/15")),
    ):
        client = redis.Redis.from_url(f"{args.url}/{db}")
        results[name] = run(name, opener, client, args.threads, args.turns)
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
