"""``fsck --repair`` never makes a readable checkpoint unreadable (issue 27, finding 3).

A list channel grown by its parent's pending writes is stored as deltas that reference
those writes (``codec.refs``). When a checkpoint row is lost, its writes have no checkpoint
any more, but the next checkpoint's delta still reads its items from them: they are no
orphans to delete. The repair copies the items into the deltas first, as deleting
checkpoints does, and only then deletes the writes.

``test_repair_never_makes_a_readable_checkpoint_unreadable`` is the rule as a property:
Hypothesis damages a database (rows deleted, parent links broken, bytes cut short,
checksums and index rows dropped), records which checkpoints still load and what they
hold, runs ``fsck(repair=True)`` and loads them again: each loads, with the same values,
pending writes and metadata. ``THREADLINE_REPAIR_EXAMPLES`` sets the examples per backend
(default 12).
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backends import Backend
from bad_input_access import cfg, ckpt, cid_of
from threadline import lifecycle
from threadline.errors import CorruptRowError
from threadline.storage.ops import Q

EXAMPLES = int(os.environ.get("THREADLINE_REPAIR_EXAMPLES", "12"))


def _fill(saver: Any) -> list[dict]:
    """Thread ``t``: ``chat`` grows by the items of the parent's pending write (deltas that
    reference writes), ``log`` by items of its own (plain list deltas), ``n`` a snapshot each
    step; a branch off step 3 on the same thread. Returns the configs of the main line."""
    said = [[f"said {step}.{i} " + "sed do eiusmod tempor " * 6 for i in range(2)] for step in range(10)]
    config, chat, log, configs = cfg("t"), [], [], []
    for step in range(9):
        chat = chat + said[step]
        log = log + [f"entry {step} " + "lorem ipsum dolor " * 3]
        versions = {"chat": str(step + 1), "log": str(step + 1), "n": str(step + 1)}
        config = saver.put(config, ckpt({"chat": chat, "log": log, "n": step}, versions), {"step": step}, versions)
        saver.put_writes(config, [("chat", said[step + 1]), ("n", step + 1)], f"task-{step}")
        configs.append(config)
    branch = saver.put(configs[3], ckpt({"chat": ["other"], "log": [], "n": -1}, {"chat": "b", "log": "b", "n": "b"}),
                       {"step": 4}, {"chat": "b", "log": "b", "n": "b"})
    saver.put_writes(branch, [("chat", ["branch write " * 20])], "task-b")
    return configs


def _loads(saver: Any) -> dict[str, Any]:
    """checkpoint_id → (values, pending writes, metadata) of every checkpoint, or the error raised."""
    out: dict[str, Any] = {}
    for (cid,) in saver.run(_ids_op()):
        saver.blob_codec.cache.clear()
        try:
            t = saver.get_tuple(cfg("t", cid=cid))
        except CorruptRowError as exc:
            out[cid] = exc
            continue
        out[cid] = (t.checkpoint["channel_values"], sorted(t.pending_writes, key=repr), t.metadata)
    return out


def _ids_op():
    return (yield Q("SELECT checkpoint_id FROM threadline_checkpoints WHERE thread_id = 't' ORDER BY checkpoint_id"))


def test_repair_copies_referenced_items_before_deleting_the_writes_of_a_lost_checkpoint(sync_backend: Backend) -> None:
    b = sync_backend
    with b.open() as saver:
        configs = _fill(saver)
    refs = [int(v) for (v,) in b.sql("SELECT version FROM threadline_blobs WHERE channel = 'chat' AND type LIKE 'delta-ref:%'")]
    assert len(refs) >= 3, "the fill must store deltas that reference pending writes"
    lost = cid_of(configs[max(refs) - 2])  # the parent of the checkpoint that stored chat's version max(refs)
    b.sql("DELETE FROM threadline_checkpoints WHERE checkpoint_id = ?", (lost,))
    with b.open() as saver:
        before = _loads(saver)
        assert not [e for e in before.values() if isinstance(e, Exception)], before
        report = lifecycle.fsck(saver)
        assert ("orphan_writes", lost) in {(f.kind, f.checkpoint_id) for f in report.findings}
        repaired = lifecycle.fsck(saver, repair=True)
        assert repaired.ok, repaired.to_json()
        assert _loads(saver) == before
        assert lifecycle.fsck(saver, deep=True).ok
    assert b.sql("SELECT COUNT(*) FROM threadline_writes WHERE checkpoint_id = ?", (lost,)) == [(0,)]


# --- the rule, over random damage ---------------------------------------------------------------

DAMAGE = {
    "checkpoint": "DELETE FROM threadline_checkpoints WHERE checkpoint_id = ?",
    "writes": "DELETE FROM threadline_writes WHERE checkpoint_id = ?",
    "blob": "DELETE FROM threadline_blobs WHERE channel = ? AND version = ?",
    "cut": "UPDATE threadline_blobs SET blob = ? WHERE channel = ? AND version = ?",
    "parent": "UPDATE threadline_checkpoints SET parent_checkpoint_id = 'gone' WHERE checkpoint_id = ?",
    "checksum": "UPDATE threadline_checkpoints SET checksum = NULL WHERE checkpoint_id = ?",
    "index": "DELETE FROM threadline_threads",
}


KEPT = ("checkpoints", "blobs", "writes", "threads")


def _keep(b: Backend) -> None:
    """Copies of the filled tables, to restore before each example (``_restore``)."""
    for t in KEPT:
        b.sql(f"CREATE TABLE kept_{t} AS SELECT * FROM threadline_{t}")


def _restore(b: Backend) -> None:
    for t in KEPT:
        b.sql(f"DELETE FROM threadline_{t}")
        b.sql(f"INSERT INTO threadline_{t} SELECT * FROM kept_{t}")


def _damage(b: Backend, choices: list[tuple[str, int]]) -> None:
    ids = [r[0] for r in b.sql("SELECT checkpoint_id FROM threadline_checkpoints ORDER BY checkpoint_id")]
    blobs = b.sql("SELECT channel, version, blob FROM threadline_blobs ORDER BY channel, version")
    for what, i in choices:
        if what in ("checkpoint", "writes", "parent", "checksum") and ids:
            b.sql(DAMAGE[what], (ids[i % len(ids)],))
        elif what in ("blob", "cut") and blobs:
            ch, v, data = blobs[i % len(blobs)]
            b.sql(DAMAGE[what], (data[: len(data) // 2], ch, v) if what == "cut" else (ch, v))
        elif what == "index":
            b.sql(DAMAGE[what])


def test_repair_never_makes_a_readable_checkpoint_unreadable(sync_backend: Backend) -> None:
    b = sync_backend
    with b.open() as saver:
        _fill(saver)
    _keep(b)

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(st.tuples(st.sampled_from(sorted(DAMAGE)), st.integers(0, 1000)), min_size=1, max_size=4))
    def check(choices: list[tuple[str, int]]) -> None:
        _restore(b)
        _damage(b, choices)
        with b.open() as saver:
            before = _loads(saver)
            lifecycle.fsck(saver, repair=True)
            after = _loads(saver)
        for cid, loaded in before.items():
            if not isinstance(loaded, Exception):
                assert after.get(cid) == loaded, (choices, cid, after.get(cid))

    check()
