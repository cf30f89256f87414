"""Monthly partitions on Postgres: what dropping an emptied month gives back, against row deletes.

Usage::

    .venv/bin/python benchmarks/partitions.py [--threads 100] [--old 20] [--new 4]

Two Postgres schemas get the same data through the saver: ``--threads`` threads, each
with ``--old`` checkpoints made two months ago and ``--new`` made now, every checkpoint
with a ~3 KB channel value and a ~3 KB pending write (a tool's output). One schema is
then partitioned by month (``threadline partition``), the other not. Then one sweep with
``retention={"older_than": 30 days}`` deletes the old checkpoints on both. Reported:
bytes on disk of ``checkpoints`` + ``writes`` (their partitions, indexes and TOAST) before
and after the sweep, and of all of threadline's tables, with the sweep's wall time
(one run on a shared machine: indicative only). Blobs are shared across months and
stay in one table, so they shrink only as the unpartitioned tables do.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import secrets
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from shrink import PG, _schema_url  # noqa: E402

from langgraph.checkpoint.base import empty_checkpoint  # noqa: E402

from threadline import open_saver  # noqa: E402
from threadline.lifecycle import partition as P  # noqa: E402
from threadline.lifecycle.vacuum import disk_bytes_op  # noqa: E402
from threadline.storage.ops import Q  # noqa: E402


def _id(when: dt.datetime, n: int) -> str:
    return P.id_at(when + dt.timedelta(milliseconds=n))[:19] + f"{0x8000 + n % 0x3FFF:04x}-{secrets.token_hex(6)}"


def fill(saver, threads: int, old: int, new: int) -> None:
    then = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) - dt.timedelta(days=62)
    for t in range(threads):
        config = {"configurable": {"thread_id": f"t{t:05d}", "checkpoint_ns": ""}}
        version = None
        for i in range(old + new):
            cid = _id(then, t * 1000 + i) if i < old else None
            version = saver.get_next_version(version, None)
            ck = {**empty_checkpoint(), "channel_values": {"notes": os.urandom(1500).hex()}, "channel_versions": {"notes": version}}
            if cid:
                ck["id"] = cid
            config = saver.put(config, ck, {"source": "loop", "step": i, "parents": {}}, {"notes": version})
            saver.put_writes(config, [("notes", os.urandom(1500).hex())], f"tool-{i}")
        saver.run(_age(f"t{t:05d}", old, time.time() - 62 * 86400), write=True)


def _age(thread_id: str, n: int, when: float):
    ids = yield Q("SELECT checkpoint_id FROM threadline_checkpoints WHERE thread_id = ? ORDER BY checkpoint_id LIMIT ?", (thread_id, n))
    for (cid,) in ids:
        yield Q("UPDATE threadline_checkpoints SET created_at = ? WHERE thread_id = ? AND checkpoint_id = ?", (when, thread_id, cid))


def _table_bytes():
    found = yield Q(
        "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = current_schema() AND c.relkind = 'r' "
        "AND (c.relname LIKE 'threadline\\_checkpoints%' OR c.relname LIKE 'threadline\\_writes%')"
    )
    return int(found[0][0])


def run(partitioned: bool, args) -> dict:
    url = _schema_url("tl_parts_yes" if partitioned else "tl_parts_no")
    with open_saver(url, retention={"older_than": 30 * 86400}) as saver:
        fill(saver, args.threads, args.old, args.new)
        if partitioned:
            P.partition(saver)  # moves the rows into one partition per month
        before, total_before = saver.run(_table_bytes()), saver.run(disk_bytes_op(saver.dialect))
        start = time.perf_counter()
        report = saver.sweep()
        seconds = time.perf_counter() - start
        after, total_after = saver.run(_table_bytes()), saver.run(disk_bytes_op(saver.dialect))
    return {"before": before, "after": after, "total_before": total_before, "total_after": total_after, "seconds": seconds,
            "deleted": report.checkpoints_deleted, "dropped": len(report.partitions_dropped), "statements": report.space.statements}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=100)
    ap.add_argument("--old", type=int, default=20)
    ap.add_argument("--new", type=int, default=4)
    args = ap.parse_args()
    mib = 1024 * 1024
    print(f"Postgres at {PG.split('@')[-1]}: {args.threads} threads × ({args.old} checkpoints two months old + {args.new} now), "
          "~3 KB value and ~3 KB pending write each; one sweep, older_than 30 days")
    print("| tables | checkpoints deleted | months dropped | checkpoints+writes before | after sweep | all tables before | after | sweep |")
    print("|---|---|---|---|---|---|---|---|")
    for partitioned in (False, True):
        r = run(partitioned, args)
        print(f"| {'monthly partitions' if partitioned else 'unpartitioned'} | {r['deleted']} | {r['dropped']} | "
              f"{r['before'] / mib:.2f} MiB | {r['after'] / mib:.2f} MiB | {r['total_before'] / mib:.2f} MiB | "
              f"{r['total_after'] / mib:.2f} MiB | {r['seconds']:.1f} s |")


if __name__ == "__main__":
    main()
