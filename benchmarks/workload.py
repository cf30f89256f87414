"""The benchmark workloads, recorded once from real LangGraph runs and replayed on every saver.

``record_agent_loop`` runs a real ``StateGraph`` (``MessagesState``) whose one node
appends two ~300-byte messages (an ``AIMessage`` with a tool call and its
``ToolMessage``) per superstep and loops back to itself, on an ``InMemorySaver``
subclass that records every ``put`` and ``put_writes`` call LangGraph makes.
``replay`` makes exactly those calls, in the same order, on another saver and
times each one: every saver sees the same checkpoints, versions and writes.

``react_graph`` is the end-to-end workload: a ReAct-style graph (agent → tools →
agent, LangGraph's ``ToolNode`` and ``tools_condition``) driven by a fake chat
model (``langchain_core`` ``BaseChatModel``) that calls a tool once per turn and
then answers.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

# --- text -------------------------------------------------------------------------------

_rnd = random.Random(20251122)
_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "an", "el", "or", "us", "ph", "th", "ing", "ion", "er"]
VOCAB = ["".join(_rnd.choice(_SYLLABLES) for _ in range(_rnd.randint(1, 4))) for _ in range(5000)]
_CUM_WEIGHTS = list(itertools.accumulate(1 / (i + 1) for i in range(len(VOCAB))))  # Zipf-like, as natural text


def text(rnd: random.Random, n_bytes: int) -> str:
    """Pseudo-English of about ``n_bytes`` bytes (Zipf word frequencies, some numbers)."""
    words: list[str] = []
    size = 0
    while size < n_bytes:
        w = rnd.choices(VOCAB, cum_weights=_CUM_WEIGHTS)[0] if rnd.random() > 0.05 else str(rnd.randint(0, 10**6))
        words.append(w)
        size += len(w) + 1
    return " ".join(words)[:n_bytes]


# --- the agent loop workload --------------------------------------------------------------------------


@dataclass
class Call:
    kind: str  # "put" | "put_writes"
    args: tuple
    step: int  # the superstep (metadata step of the next put)


@dataclass
class Recording:
    threads: dict[str, list[Call]] = field(default_factory=dict)
    final_values: dict[str, dict[str, Any]] = field(default_factory=dict)
    write_values: list[Any] = field(default_factory=list)

    def steps(self) -> int:
        return max(c.step for calls in self.threads.values() for c in calls)


def _copy_checkpoint(ck: dict) -> dict:
    values = {k: (list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v) for k, v in ck["channel_values"].items()}
    return {
        **ck,
        "channel_values": values,
        "channel_versions": dict(ck["channel_versions"]),
        "versions_seen": {k: dict(v) for k, v in ck["versions_seen"].items()},
    }


class RecordingSaver(InMemorySaver):
    """An InMemorySaver that records the calls LangGraph makes (copies of their arguments)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[str, list[tuple]] = {}

    def put(self, config, checkpoint, metadata, new_versions):
        tid = config["configurable"]["thread_id"]
        self.calls.setdefault(tid, []).append(("put", (dict_deep(config), _copy_checkpoint(checkpoint), dict(metadata), dict(new_versions))))
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config, writes, task_id, task_path=""):
        tid = config["configurable"]["thread_id"]
        self.calls.setdefault(tid, []).append(("put_writes", (dict_deep(config), list(writes), task_id, task_path)))
        return super().put_writes(config, writes, task_id, task_path)


def dict_deep(config: dict) -> dict:
    """The parts of a LangGraph config a saver reads: ``configurable`` keys and ``metadata``."""
    conf = {k: v for k, v in config["configurable"].items() if k in ("thread_id", "checkpoint_ns", "checkpoint_id")}
    return {"configurable": conf, "metadata": dict(config.get("metadata") or {})}


def agent_loop_graph(steps: int, seed: int):
    rnd = random.Random(seed)

    def agent(state: MessagesState) -> dict:
        n = len(state["messages"])
        call_id = f"call_{n}"
        ai = AIMessage(
            content=text(rnd, 300),
            id=f"ai-{n}",
            tool_calls=[{"name": "search", "args": {"query": text(rnd, 40)}, "id": call_id, "type": "tool_call"}],
        )
        result = ToolMessage(content=text(rnd, 300), tool_call_id=call_id, id=f"tool-{n}", name="search")
        return {"messages": [ai, result]}

    def route(state: MessagesState) -> str:
        return END if len(state["messages"]) >= 1 + 2 * steps else "agent"

    b = StateGraph(MessagesState)
    b.add_node("agent", agent)
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", route, ["agent", END])
    return b


def record_agent_loop(threads: int = 3, steps: int = 300) -> Recording:
    """Run the agent loop on ``threads`` threads for ``steps`` supersteps each and record the saver calls."""
    rec = Recording()
    for t in range(threads):
        saver = RecordingSaver()
        graph = agent_loop_graph(steps, seed=t).compile(checkpointer=saver)
        tid = f"thread-{t}"
        config = {"configurable": {"thread_id": tid}, "recursion_limit": 10 * steps + 10}
        graph.invoke({"messages": [HumanMessage(content=text(random.Random(t), 300), id=f"human-{t}")]}, config, durability="sync")
        calls = []
        pending: list[Call] = []
        for kind, args in saver.calls[tid]:
            if kind == "put_writes":
                pending.append(Call(kind, args, -1))
                rec.write_values += [v for _, v in args[1]]
            else:
                step = args[2].get("step", 0)
                for c in pending:
                    c.step = step
                calls += pending + [Call(kind, args, step)]
                pending = []
        calls += pending
        rec.threads[tid] = calls
        rec.final_values[tid] = graph.get_state({"configurable": {"thread_id": tid}}).values
    return rec


def record_long_thread(messages: int = 2000, steps: int = 64, seed: int = 99) -> Recording:
    """One thread (``long-0``) whose last checkpoint holds ``messages`` messages: the agent loop
    given a history of ``messages - 2 * steps`` messages as input, then run for ``steps``
    supersteps (so a delta-encoding saver reads a snapshot and a chain, as after a long run)."""
    rnd = random.Random(seed)
    history: list = [HumanMessage(content=text(rnd, 300), id="human-long")]
    while len(history) < messages - 2 * steps:
        n = len(history)
        call = {"name": "search", "args": {"query": text(rnd, 40)}, "id": f"call_{n}", "type": "tool_call"}
        history += [AIMessage(content=text(rnd, 300), id=f"ai-{n}", tool_calls=[call]),
                    ToolMessage(content=text(rnd, 300), tool_call_id=f"call_{n}", id=f"tool-{n}", name="search")]
    saver = RecordingSaver()
    graph = agent_loop_graph(messages // 2, seed).compile(checkpointer=saver)
    graph.invoke({"messages": history}, {"configurable": {"thread_id": "long-0"}, "recursion_limit": 10 * steps + 10}, durability="sync")
    rec = Recording()
    rec.threads["long-0"] = [Call(kind, args, -1) for kind, args in saver.calls["long-0"]]
    rec.final_values["long-0"] = graph.get_state({"configurable": {"thread_id": "long-0"}}).values
    return rec


def interleaved(rec: Recording) -> Iterator[tuple[str, Call]]:
    """The calls of all threads, round-robin by superstep (as concurrent agents would write)."""
    by_step: dict[int, list[tuple[str, Call]]] = {}
    for tid, calls in rec.threads.items():
        for c in calls:
            by_step.setdefault(c.step, []).append((tid, c))
    for step in sorted(by_step):
        yield from by_step[step]


@dataclass
class Timings:
    put: dict[tuple[str, int], float] = field(default_factory=dict)  # (thread, step) → ms
    writes: dict[tuple[str, int], float] = field(default_factory=dict)
    cpu: dict[tuple[str, int], float] = field(default_factory=dict)  # put + put_writes CPU ms, client and server
    last_config: dict[str, dict] = field(default_factory=dict)


def replay(saver: Any, rec: Recording) -> Timings:
    """Make the recorded calls on ``saver``; time each (ms), per (thread, superstep)."""
    t = Timings()
    clock = time.perf_counter
    for tid, call in interleaved(rec):
        start = clock()
        if call.kind == "put":
            out = saver.put(*call.args)
            elapsed = (clock() - start) * 1000
            t.put[(tid, call.step)] = t.put.get((tid, call.step), 0.0) + elapsed
            t.last_config[tid] = out
        else:
            saver.put_writes(*call.args)
            elapsed = (clock() - start) * 1000
            t.writes[(tid, call.step)] = t.writes.get((tid, call.step), 0.0) + elapsed
    return t


# --- the end-to-end ReAct graph ------------------------------------------------------------------------


@tool
def search(query: str) -> str:
    """Search the knowledge base."""
    rnd = random.Random(hash(query) & 0xFFFF)
    return text(rnd, 300)


class FakeToolCallingModel(BaseChatModel):
    """Calls ``search`` once per user turn, then answers (deterministic ~300-byte texts)."""

    seed: int = 0

    @property
    def _llm_type(self) -> str:
        return "fake-tool-calling"

    def bind_tools(self, tools: Any, **kwargs: Any) -> FakeToolCallingModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        n = len(messages)
        rnd = random.Random(self.seed * 1_000_003 + n)
        if isinstance(messages[-1], HumanMessage):
            msg = AIMessage(
                content=text(rnd, 120),
                id=f"ai-{self.seed}-{n}",
                tool_calls=[{"name": "search", "args": {"query": text(rnd, 40)}, "id": f"call-{self.seed}-{n}", "type": "tool_call"}],
            )
        else:
            msg = AIMessage(content=text(rnd, 300), id=f"ai-{self.seed}-{n}")
        return ChatResult(generations=[ChatGeneration(message=msg)])


def react_graph(seed: int = 0):
    model = FakeToolCallingModel(seed=seed).bind_tools([search])

    def agent(state: MessagesState) -> dict:
        return {"messages": [model.invoke(state["messages"])]}

    b = StateGraph(MessagesState)
    b.add_node("agent", agent)
    b.add_node("tools", ToolNode([search]))
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", tools_condition, ["tools", END])
    b.add_edge("tools", "agent")
    return b


def user_turn(thread: int, turn: int) -> dict:
    rnd = random.Random(thread * 7919 + turn)
    return {"messages": [HumanMessage(content=text(rnd, 200), id=f"human-{thread}-{turn}")]}
