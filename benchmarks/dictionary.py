"""How threadline's zstd dictionary was made: ``.venv/bin/python benchmarks/dictionary.py``.

A pending write or a delta holds one or two chat messages: a few hundred bytes, of which
the serializer's envelope (class path, field names, ids) is a large part, which zstd alone
cannot compress in a frame that small. A dictionary trained on such values supplies it.

The training corpus is made here, not taken from any benchmark: LangChain messages of
every kind (human, AI with and without tool calls, tool, system), singly and in the
one- and two-item lists a graph writes to a ``messages`` channel, plus a few plain state
values, with text cut from the docstrings of Python's standard library, serialized by
LangGraph's own serializer. ``--write`` saves the dictionary where the codec loads it
(``threadline/codec/messages.zdict``, ID ``codec.dictionary.DICT_ID``) — only ever to
make a *new* dictionary with a new ID: stored frames name the dictionary they need, so a
shipped one never changes. Without ``--write`` it prints what the shipped dictionary
saves on the benchmark's messages (``workload.py``) against zstd alone.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import random
import sys
import uuid
from pathlib import Path

import zstandard
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from threadline.codec import dictionary

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

SIZE = 4096  # bytes: 8 and 16 KiB saved less on the benchmark's messages (measured when made)
SAMPLES = 4000


def _texts() -> list[str]:
    """Docstrings of a few standard-library modules: ordinary technical English."""
    mods = [importlib.import_module(name) for name in
            ("asyncio", "collections", "email", "http", "json", "os", "pathlib", "re", "textwrap", "inspect", "random")]
    return [d for m in mods for _, obj in inspect.getmembers(m) if (d := inspect.getdoc(obj))]


def corpus(n: int = SAMPLES, seed: int = 1) -> list[bytes]:
    """``n`` serialized values of the kinds a chat graph stores (module docstring)."""
    rnd = random.Random(seed)
    texts = _texts()
    serde = JsonPlusSerializer()

    def ident() -> str:
        return str(uuid.UUID(int=rnd.getrandbits(128), version=4))

    def message():
        text = rnd.choice(texts)[: rnd.randint(20, 900)]
        kind = rnd.random()
        if kind < 0.3:
            call = {"name": rnd.choice(["search", "lookup", "get_weather", "run_query"]),
                    "args": {"query": text[:40]}, "id": f"call_{rnd.getrandbits(64):x}", "type": "tool_call"}
            return AIMessage(content=text if rnd.random() < 0.5 else "", id=ident(), tool_calls=[call],
                             response_metadata={"model_name": "model", "finish_reason": "tool_calls"},
                             usage_metadata={"input_tokens": rnd.randint(1, 9999), "output_tokens": rnd.randint(1, 999),
                                             "total_tokens": rnd.randint(1, 9999)})
        if kind < 0.5:
            return ToolMessage(content=text, tool_call_id=f"call_{rnd.getrandbits(64):x}", name="search", id=ident())
        if kind < 0.75:
            return HumanMessage(content=text, id=ident())
        if kind < 0.8:
            return SystemMessage(content=text, id=ident())
        return AIMessage(content=text, id=ident(), response_metadata={"finish_reason": "stop"})

    out = []
    for _ in range(n):
        shape = rnd.random()
        if shape < 0.5:
            value = [message()]
        elif shape < 0.8:
            value = [message(), message()]
        elif shape < 0.9:
            value = message()
        else:
            value = {"step": rnd.randint(0, 500), "status": rnd.choice(["ok", "pending", "done"]), "note": rnd.choice(texts)[:200]}
        out.append(serde.dumps_typed(value)[1])
    return out


def benchmark_messages() -> list[bytes]:
    import workload as W

    serde = JsonPlusSerializer()
    rec = W.record_agent_loop(3, 300)
    return [serde.dumps_typed(v)[1] for calls in rec.threads.values() for c in calls if c.kind == "put_writes"
            for ch, v in c.args[1] if ch == "messages"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help=f"train a new dictionary (ID {dictionary.DICT_ID}) and save it")
    args = ap.parse_args(argv)
    if args.write:
        trained = zstandard.train_dictionary(SIZE, corpus(), dict_id=dictionary.DICT_ID, level=3)
        dictionary.PATH.write_bytes(trained.as_bytes())
        print(f"wrote {dictionary.PATH} ({len(trained.as_bytes())} bytes, ID {trained.dict_id()})")
        return 0
    values = benchmark_messages()
    plain = zstandard.ZstdCompressor(level=3)
    with_dict = zstandard.ZstdCompressor(level=3, dict_data=dictionary.load())
    raw, a, b = (sum(map(len, values)), sum(len(plain.compress(v)) for v in values),
                 sum(len(with_dict.compress(v)) for v in values))
    print(f"{len(values)} pending writes of the benchmark, {raw} bytes: zstd {a} bytes, zstd + dictionary {b} ({b / a:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
