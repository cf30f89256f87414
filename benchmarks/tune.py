"""How threadline's codec defaults were chosen: ``.venv/bin/python benchmarks/tune.py``.

Replays the agent-loop workload (``workload.py``; default 1 thread × 300
supersteps) on threadline savers that differ in one setting, all at once (call
by call, as ``run.py`` does), and prints per variant: bytes on disk, put+put_writes
ms per superstep at the last step, get-latest ms, and the chain read alone
(``ops.fetch_blobs`` of the latest checkpoint: the recursive CTE plus
reconstruction, without deserialization), which is what K trades against bytes.

* ``--sweep k``: K (``BlobCodec.max_depth``) on SQLite and Postgres;
* ``--sweep compress``: the compression threshold (``compress_min_bytes``) and level.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run as B  # noqa: E402
import workload as W  # noqa: E402
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer  # noqa: E402

from threadline.storage import ops  # noqa: E402
from threadline.storage import rows as R  # noqa: E402


def chain_read_ms(saver, thread_id: str, rounds: int = 15) -> float:
    tup = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
    keys = [(thread_id, "", ch, R.version_key(v)) for ch, v in tup.checkpoint["channel_versions"].items()]
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        saver.run(ops.fetch_blobs(saver.dialect, keys))
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


OUT: list[str] = []


def emit(line: str = "") -> None:
    print(line)
    OUT.append(line)


def sweep(variants: list[B.Saver], rec: W.Recording, denominator: int, last: int) -> None:
    figs = B.measure(variants, rec, denominator, [last], profile=False)
    tid = next(iter(rec.threads))
    chain = []
    with ExitStack() as stack:
        for s in variants:
            saver, _ = stack.enter_context(s.open_again())
            chain.append(chain_read_ms(saver, tid))
    emit(f"| variant | bytes on disk | amplification | put+put_writes ms @{last} | get-latest ms (nothing cached) | chain read ms |")
    emit("|---|---|---|---|---|---|")
    for f, c in zip(figs, chain):
        emit(f"| {f.saver.name} | {B.fmt_bytes(f.bytes)} | {f.amplification:.2f} | {f.both[last]:.2f} | {f.get_latest_cold:.2f} | {c:.2f} |")
    emit()


def compression_by_size() -> None:
    """zstd on single LangChain messages of the workload's text, by content length."""
    import random

    import zstandard
    from langchain_core.messages import AIMessage

    serde = JsonPlusSerializer()
    c, d = zstandard.ZstdCompressor(level=3), zstandard.ZstdDecompressor()
    rnd = random.Random(3)
    emit("### zstd (level 3) on one message, by content length\n")
    emit("| message content | serialized bytes | compressed bytes | ratio | compress µs | decompress µs |")
    emit("|---|---|---|---|---|---|")
    for n in (20, 60, 120, 200, 300, 600, 1200, 3000):
        raws = [serde.dumps_typed(AIMessage(content=W.text(rnd, n), id=f"m{i}"))[1] for i in range(200)]
        zs = [c.compress(r) for r in raws]
        start = time.perf_counter()
        for r in raws:
            c.compress(r)
        ct = (time.perf_counter() - start) / len(raws) * 1e6
        start = time.perf_counter()
        for z in zs:
            d.decompress(z)
        dt = (time.perf_counter() - start) / len(zs) * 1e6
        rb, zb = statistics.mean(map(len, raws)), statistics.mean(map(len, zs))
        emit(f"| {n} chars | {rb:.0f} | {zb:.0f} | {rb / zb:.2f} | {ct:.1f} | {dt:.1f} |")
    emit()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--sweep", choices=["k", "compress", "all"], default="all")
    ap.add_argument("--no-postgres", action="store_true")
    ap.add_argument("--write-results", action="store_true", help="rewrite the tuning part of RESULTS.md")
    args = ap.parse_args()
    rec = W.record_agent_loop(args.threads, args.steps)
    serde = JsonPlusSerializer()
    denominator = sum(len(serde.dumps_typed(v)[1]) for vals in rec.final_values.values() for v in vals.values())
    denominator += sum(len(serde.dumps_typed(v)[1]) for v in rec.write_values)
    gc.freeze()
    use_pg = not args.no_postgres and B.postgres_reason() is None
    with tempfile.TemporaryDirectory(prefix="threadline-tune-") as tmp:
        if args.sweep in ("k", "all"):
            ks = [8, 16, 32, 64, 128, 256]
            emit(f"### K (max deltas between snapshots), SQLite, {args.threads}×{args.steps}\n")
            sweep([B.Saver("sqlite", f"K={k}", False, B.threadline_sqlite(tmp, f"k{k}", max_depth=k)) for k in ks], rec, denominator, args.steps)
            if use_pg:
                emit(f"### K, Postgres, {args.threads}×{args.steps}\n")
                sweep([B.Saver("postgres", f"K={k}", False, B.threadline_postgres(f"bench_tune_k{k}", max_depth=k)) for k in ks], rec, denominator, args.steps)
        if args.sweep in ("compress", "all"):
            compression_by_size()
            emit(f"### Compression threshold (bytes) and zstd level, SQLite, {args.threads}×{args.steps}\n")
            variants = [B.Saver("sqlite", "never", False, B.threadline_sqlite(tmp, "c-never", compress_min_bytes=-1))]
            for threshold in (128, 256, 512, 1024, 4096):
                variants.append(B.Saver("sqlite", f"≥{threshold} B, level 3", False, B.threadline_sqlite(tmp, f"c{threshold}", compress_min_bytes=threshold)))
            variants.append(B.Saver("sqlite", "≥512 B, level 1", False, B.threadline_sqlite(tmp, "c512l1", compress_min_bytes=512, zstd_level=1)))
            variants.append(B.Saver("sqlite", "≥512 B, level 6", False, B.threadline_sqlite(tmp, "c512l6", compress_min_bytes=512, zstd_level=6)))
            sweep(variants, rec, denominator, args.steps)
    if args.write_results:
        B.write_results(f"{B.machine()}\n\n" + "\n".join(OUT), start="<!-- tune:start -->", end="<!-- tune:end -->")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
