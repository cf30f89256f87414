"""Process entry points for the sweeper tests: writers that record every checkpoint's state
as LangGraph computed it, and sweepers running a saver's background sweeper.

Kept outside the test modules so ``multiprocessing`` (spawn) can import them without pytest.
"""

from __future__ import annotations

import json
import os
import time

from workers import build_chat, user_message

SHORT_TTL_MINUTES = 0.05  # 3 s: longer than any pause inside one run on a loaded machine


def write_and_record(url: str, active: list[str], short_lived: list[str], turns: int, record: str) -> None:
    """Run ``turns`` turns on each ``active`` thread and one turn on each ``short_lived`` thread
    (with its own TTL), recording ``[thread_id, checkpoint_ns, checkpoint_id, values]`` of every
    checkpoint LangGraph wrote (from ``stream_mode="checkpoints"``: its own in-memory values)."""
    from threadline import open_saver

    rows = []
    with open_saver(url) as saver:
        graph = build_chat().compile(checkpointer=saver)

        def run(tid: str, turn: int, **configurable) -> None:
            config = {"configurable": {"thread_id": tid, **configurable}}
            for event in graph.stream({"messages": [user_message(tid, turn)]}, config, stream_mode="checkpoints"):
                c = event["config"]["configurable"]
                rows.append([c["thread_id"], c["checkpoint_ns"], c["checkpoint_id"], event["values"]])

        for turn in range(turns):
            for tid in active:
                run(tid, turn)
            if turn < len(short_lived):
                run(short_lived[turn], 0, ttl_minutes=SHORT_TTL_MINUTES)
    with open(record, "w") as f:
        json.dump(rows, f)


def sweep_until(url: str, stop_file: str, record: str) -> None:
    """Run a saver's background sweeper (TTL sweeps every 0.3 s, keep the last 2 checkpoints of
    each branch) until ``stop_file`` exists; record every sweep's report."""
    from threadline import open_saver

    with open_saver(url, ttl={"sweep_interval_minutes": 0.005}, retention={"keep_last": 2}) as saver:
        while not os.path.exists(stop_file):
            time.sleep(0.05)
        reports = [r.to_json() for r in saver._sweeper.reports]
    with open(record, "w") as f:
        json.dump(reports, f)
