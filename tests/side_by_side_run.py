"""The machinery of the side-by-side test (``test_side_by_side.py``): comparing, running, the savers.

Comparing: ``_diff`` (readable field-by-field differences), ``compare_listing``
(``list()`` results, ties of one checkpoint_id in any order), ``Outcome`` /
``outcome`` (a result or an exception). Running: ``Run`` resolves the operations
of ``side_by_side_ops`` and makes each call on both savers, ``run_sequence``
drives a whole sequence and reads both databases back; a difference raises
``Mismatch``. ``OFFICIAL_SKIPS`` records the calls the official saver did not
implement at run time. The savers: ``sqlite_pair`` / ``postgres_pair`` open an
official and a threadline saver on fresh databases.
"""

from __future__ import annotations

import copy
import json
import tempfile
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backends import pg_schemas
from hypothesis import note
from hypothesis.control import currently_in_test_context
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.base.id import uuid6
from side_by_side_ops import (
    CHANNELS,
    EMPTY,
    NAMESPACES,
    TASKS,
    THREADS,
    CopyThread,
    DeleteForRuns,
    DeleteThread,
    GetTuple,
    List,
    Prune,
    Put,
    PutWrites,
)

# --- comparing ----------------------------------------------------------------

OFFICIAL_SKIPS: dict[str, set[str]] = {}


class Mismatch(AssertionError):
    pass


def _diff(a: Any, b: Any, path: str = "", out: list[str] | None = None) -> list[str]:
    """Where ``a`` (official) and ``b`` (threadline) differ, as readable lines."""
    out = [] if out is None else out
    if len(out) >= 12:
        return out
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in b:
                out.append(f"{path}[{k!r}]: official has {a[k]!r}, threadline has no such key")
            elif k not in a:
                out.append(f"{path}[{k!r}]: threadline has {b[k]!r}, official has no such key")
            else:
                _diff(a[k], b[k], f"{path}[{k!r}]", out)
    elif isinstance(a, CheckpointTuple) and isinstance(b, CheckpointTuple):
        for name in CheckpointTuple._fields:
            _diff(getattr(a, name), getattr(b, name), f"{path}.{name}", out)
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and type(a) is type(b) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{path}[{i}]", out)
    elif _fresh_tasks_version(path, a, b):
        pass  # both savers draw a new random version for sends migrated onto an empty checkpoint
    elif not (a == b and type(a) is type(b)) and not (a == b and {type(a), type(b)} <= {int, float}):
        out.append(f"{path or 'result'}: official {a!r} ({type(a).__name__}) != threadline {b!r} ({type(b).__name__})")
    return out


def _fresh_tasks_version(path: str, a: Any, b: Any) -> bool:
    """The TASKS version a v<4 checkpoint with no channel_versions gets on read:
    ``get_next_version(None)`` on both sides, equal but for its random suffix."""
    first = f"{1:032}."
    return (
        path.endswith(f"['channel_versions'][{TASKS!r}]")
        and isinstance(a, str) and isinstance(b, str)
        and a.startswith(first) and b.startswith(first)
    )


def _loc(t: CheckpointTuple) -> tuple[str, str]:
    c = t.config["configurable"]
    return (str(c["thread_id"]), str(c["checkpoint_ns"]))


def _cid(t: CheckpointTuple) -> str:
    return t.config["configurable"]["checkpoint_id"]


def compare_listing(off: list, mine: list, limit: int | None, complete: list | None) -> list[str]:
    """Compare two ``list()`` results.

    The official savers order by ``checkpoint_id DESC`` only, so rows with the
    SAME checkpoint_id in different threads / namespaces (a copied thread, a
    checkpoint put again elsewhere) come in no defined order: such ties are
    compared order-insensitively (sorted by thread_id, checkpoint_ns). When
    ``limit`` cuts through a tie, WHICH tied rows come back is not defined
    either: threadline's must be rows the unlimited official listing
    (``complete``) has.
    """
    off_ids, my_ids = [_cid(t) for t in off], [_cid(t) for t in mine]
    if off_ids != my_ids:
        return [
            (
                "checkpoint ids differ (id tail, thread_id, checkpoint_ns):"
                f"\n      official:   {[(_cid(t)[-12:],) + _loc(t) for t in off]}"
                f"\n      threadline: {[(_cid(t)[-12:],) + _loc(t) for t in mine]}"
            )
        ]
    problems: list[str] = []
    i = 0
    while i < len(off):
        j = i
        while j < len(off) and off_ids[j] == off_ids[i]:
            j += 1
        og, mg = sorted(off[i:j], key=_loc), sorted(mine[i:j], key=_loc)
        cut = limit is not None and j == len(off) == limit and complete is not None
        if cut and len([t for t in complete if _cid(t) == off_ids[i]]) > j - i:
            allowed = [t for t in complete if _cid(t) == off_ids[i]]
            for t in mg:
                if t not in allowed:
                    problems.append(f"row {_loc(t)} of tied id {off_ids[i]} is not one the official has: {_diff(next((a for a in allowed if _loc(a) == _loc(t)), None), t)}")
            if len({_loc(t) for t in mg}) != len(mg):
                problems.append(f"duplicate rows for tied id {off_ids[i]}")
        elif og != mg:
            if [_loc(t) for t in og] != [_loc(t) for t in mg]:
                problems.append(f"rows with id {off_ids[i]}: official at {[_loc(t) for t in og]}, threadline at {[_loc(t) for t in mg]}")
            else:
                for a, b in zip(og, mg):
                    lines = _diff(a, b)
                    if _loc(a)[0] != _loc(off[0])[0]:
                        # official PostgresSaver.list looks up a v<4 row's pending sends in the
                        # FIRST listed row's thread; threadline in the row's own (a README difference)
                        lines = [x for x in lines if f"[{TASKS!r}]" not in x]
                    problems += [f"row {_loc(a)}: {line}" for line in lines]
        i = j
    return problems


@dataclass
class Outcome:
    value: Any = None
    error: BaseException | None = None

    def describe(self) -> str:
        if self.error is None:
            return repr(self.value)[:300]
        return f"raised {type(self.error).__name__}: {self.error}"


def _also_accepted(error: BaseException) -> tuple[type, ...]:
    """When the official saver fails because its DATABASE refused a value (a
    sqlite3 / psycopg error, e.g. Postgres' "\\u0000 cannot be converted to text"),
    threadline may refuse the same call with any exception of its own: nobody
    catches the official driver's exception class on purpose. Every other
    official exception (ValueError, TypeError, KeyError, ...) must be matched by
    an instance of the same class."""
    import sqlite3

    import psycopg

    return (Exception,) if isinstance(error, (sqlite3.Error, psycopg.Error)) else ()


def outcome(fn: Callable[[], Any]) -> Outcome:
    try:
        return Outcome(value=fn())
    except Exception as exc:  # noqa: BLE001 - every exception is an observable result
        return Outcome(error=exc)



def _deliberately_different_filter(value: Any) -> bool:
    """Filter values threadline treats differently on purpose (README, deliberate differences):
    a string with NUL (FilterError where the official SQLite saver returns []), and a list or
    object holding non-ASCII text (matched, where the official SQLite saver's ASCII-escaped
    filter text never matches)."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, (dict, list)):
        return not json.dumps(value, ensure_ascii=False).isascii() or any(
            _deliberately_different_filter(v) for v in (value.values() if isinstance(value, dict) else value)
        )
    return False


# --- running ------------------------------------------------------------------


@dataclass
class Run:
    backend: str
    official: Any
    mine: Any
    log: list[str] = field(default_factory=list)
    puts: list[tuple[str, str, str]] = field(default_factory=list)  # (thread, ns, checkpoint_id) of every put
    metadata: list[dict] = field(default_factory=list)  # the metadata argument of every put
    last_id: str = ""
    clock: int = 0

    # failing

    def fail(self, call: str, problems: list[str]) -> None:
        trace = "\n".join(f"  {i + 1:>2}. {line}" for i, line in enumerate(self.log))
        raise Mismatch(
            f"[{self.backend}] official and threadline differ on call #{len(self.log)}: {call}\n"
            + "\n".join(f"    {p}" for p in problems)
            + f"\ncalls so far (both savers got each one):\n{trace}"
        )

    def both(self, call: str, fn: Callable[[Any], Any], compare: Callable[[Any, Any], list[str]] | None = None) -> Any:
        """Run ``fn`` on both savers; compare results or exceptions; return the official result."""
        self.log.append(call)
        if currently_in_test_context():  # also usable outside hypothesis, e.g. to replay a sequence by hand
            note(f"{len(self.log)}. {call}")
        off = outcome(lambda: fn(self.official))
        if isinstance(off.error, NotImplementedError):
            # Not run on threadline either, so both databases stay the same.
            OFFICIAL_SKIPS.setdefault(self.backend, set()).add(call.split("(")[0])
            self.log[-1] += "   [official: NotImplementedError; skipped on both]"
            return None
        mine = outcome(lambda: fn(self.mine))
        if off.error is not None or mine.error is not None:
            if off.error is not None and mine.error is not None and isinstance(mine.error, (type(off.error),) + _also_accepted(off.error)):
                return None
            if off.error is not None and mine.error is None and _also_accepted(off.error) and call.startswith(("list(", "get_tuple(")):
                # a read the official database refused (e.g. Postgres' negative LIMIT): threadline
                # may answer it; nothing is written, so the two databases stay the same
                return None
            problems = [f"official {off.describe()}", f"threadline {mine.describe()}"]
            if mine.error is not None:
                problems.append("threadline traceback:\n" + "".join(traceback.format_exception(mine.error)[-3:]))
            self.fail(call, problems)
        problems = compare(off.value, mine.value) if compare else _diff(off.value, mine.value)
        if problems:
            self.fail(call, problems)
        return off.value

    # helpers

    def new_id(self) -> str:
        while True:
            self.clock += 1
            cid = str(uuid6(clock_seq=self.clock))
            if cid > self.last_id:
                self.last_id = cid
                return cid

    def listing(self, saver: Any, config: Any, **kw: Any) -> list:
        return list(saver.list(config, **kw))

    def official_line(self, thread: str, ns: str) -> list[CheckpointTuple]:
        """The official saver's checkpoints of (thread, ns), oldest first."""
        return list(reversed(list(self.official.list({"configurable": {"thread_id": thread, "checkpoint_ns": ns}}))))

    # operations

    def do(self, op: Any) -> None:
        getattr(self, "do_" + type(op).__name__)(op)

    def do_Put(self, op: Put) -> None:
        line = self.official_line(op.thread, op.ns)
        parent_id = None
        base = line[-1] if line else None
        if op.parent is not None:
            kind, i = op.parent
            if kind == "same" and line:
                base = line[i % len(line)]
                parent_id = _cid(base)
            elif kind == "any" and self.puts:
                parent_id = self.puts[i % len(self.puts)][2]
                base = next((t for t in line if _cid(t) == parent_id), base)
        values = {k: v for k, v in (base.checkpoint["channel_values"] if base else {}).items() if k in CHANNELS}
        versions = {k: v for k, v in (base.checkpoint["channel_versions"] if base else {}).items() if k in CHANNELS}
        new_versions = {}
        for ch, val in op.changes:
            versions[ch] = new_versions[ch] = self.official.get_next_version(versions.get(ch), None)
            if val is EMPTY:
                values.pop(ch, None)
            else:
                values[ch] = copy.deepcopy(val)
        cid = self.puts[op.reuse % len(self.puts)][2] if op.reuse is not None and self.puts else self.new_id()
        checkpoint: dict[str, Any] = {
            "v": op.v,
            "id": cid,
            "ts": f"2024-05-04T06:32:{len(self.log) % 60:02d}.000000+00:00",
            "channel_values": values,
            "channel_versions": versions,
            "versions_seen": {"__input__": {}, "node": dict(new_versions)},
        }
        if op.shape == "updated":
            checkpoint["updated_channels"] = sorted(new_versions)
        elif op.shape == "legacy":
            checkpoint["pending_sends"] = []
            checkpoint["updated_channels"] = None
        metadata = copy.deepcopy(op.metadata)
        if op.with_parents:
            roots = self.official_line(op.thread, "") if op.ns else []
            metadata["parents"] = {"": _cid(roots[-1])} if roots else {}
        conf = {"thread_id": op.thread, "checkpoint_ns": op.ns, **copy.deepcopy(op.conf_extra)}
        if parent_id is not None:
            conf["checkpoint_id"] = parent_id
        config: dict[str, Any] = {"configurable": conf}
        if op.conf_metadata is not None:
            config["metadata"] = dict(op.conf_metadata)
        args = (config, checkpoint, metadata, new_versions)
        inputs: dict[str, Any] = {}

        def put(saver: Any) -> Any:
            mine = copy.deepcopy(args)
            result = saver.put(*mine)
            inputs[id(saver)] = mine
            return result

        self.both(f"put({config!r}, {checkpoint!r}, metadata={metadata!r}, new_versions={new_versions!r})", put)
        self.puts.append((op.thread, op.ns, cid))
        self.metadata.append(metadata)
        if id(self.official) in inputs and id(self.mine) in inputs:
            problems = _diff(inputs[id(self.official)], inputs[id(self.mine)])
            if problems:
                self.fail("put(...) modified its arguments differently", problems)

    def do_PutWrites(self, op: PutWrites) -> None:
        if not self.puts:
            return
        thread, ns, cid = self.puts[op.target % len(self.puts)]
        config = {"configurable": {"thread_id": op.thread or thread, "checkpoint_ns": ns, "checkpoint_id": cid}}
        writes = [(ch, copy.deepcopy(v)) for ch, v in op.writes]
        self.both(
            f"put_writes({config!r}, {writes!r}, task_id={op.task_id!r}, task_path={op.task_path!r})",
            lambda s: s.put_writes(copy.deepcopy(config), copy.deepcopy(writes), op.task_id, op.task_path),
        )

    def do_GetTuple(self, op: GetTuple) -> None:
        conf: dict[str, Any] = {"thread_id": op.thread}
        if op.ns is not None:
            conf["checkpoint_ns"] = op.ns
        if op.target is not None and self.puts:
            thread, ns, cid = self.puts[op.target % len(self.puts)]
            conf["checkpoint_id"] = cid
            if op.at_target:
                conf["thread_id"], conf["checkpoint_ns"] = thread, ns
        config: dict[str, Any] = {"configurable": conf}
        for k, v in op.extra.items():
            if k == "metadata":
                config["metadata"] = {"user_id": v}
            elif k == "tags":
                config["tags"] = [f"tag{v}"]
            elif k == "recursion_limit":
                config[k] = 25 + v
            else:
                conf[k.removeprefix("configurable.")] = v
        self.both(f"get_tuple({config!r})", lambda s: s.get_tuple(copy.deepcopy(config)))

    def do_List(self, op: List) -> None:
        config: dict | None = None
        tid = self.puts[op.target % len(self.puts)][2] if self.puts else str(uuid6())
        if op.scope != "none":
            conf: dict[str, Any] = {"thread_id": op.thread}
            if op.scope.startswith("thread_ns"):
                conf["checkpoint_ns"] = op.ns
            if op.scope.endswith("_id"):
                conf["checkpoint_id"] = tid
            config = {"configurable": conf}
        before = None
        if op.before == "future":
            before = {"configurable": {"checkpoint_id": str(uuid6(clock_seq=0x3FFF))}}
        elif op.before is not None and self.puts:
            before = {"configurable": {"checkpoint_id": self.puts[op.before % len(self.puts)][2]}}
        flt = None if op.filter is None else {k: self.filter_value(k, v) for k, v in op.filter.items()}
        if flt and any(_deliberately_different_filter(v) for v in flt.values()):
            return  # see test_deliberate_differences_on_sqlite
        kw = {"filter": flt, "before": before, "limit": op.limit}
        complete = None
        if op.limit is not None:
            complete = outcome(lambda: self.listing(self.official, config, filter=flt, before=before)).value
        self.both(
            f"list({config!r}, filter={flt!r}, before={before!r}, limit={op.limit!r})",
            lambda s: self.listing(s, copy.deepcopy(config), **copy.deepcopy(kw)),
            lambda a, b: compare_listing(a, b, op.limit, complete),
        )

    def filter_value(self, key: str, spec: tuple[str, Any]) -> Any:
        kind, value = spec
        if kind == "lit":
            return copy.deepcopy(value)
        if not self.metadata:
            return None
        md = self.metadata[value % len(self.metadata)]
        if key in md:
            return copy.deepcopy(md[key])
        for part in key.split("."):
            if not isinstance(md, dict) or part not in md:
                return None
            md = md[part]
        return copy.deepcopy(md)

    def do_DeleteThread(self, op: DeleteThread) -> None:
        self.both(f"delete_thread({op.thread!r})", lambda s: s.delete_thread(op.thread))

    def do_DeleteForRuns(self, op: DeleteForRuns) -> None:
        self.both(f"delete_for_runs({list(op.run_ids)!r})", lambda s: s.delete_for_runs(list(op.run_ids)))

    def do_CopyThread(self, op: CopyThread) -> None:
        self.both(f"copy_thread({op.source!r}, {op.target!r})", lambda s: s.copy_thread(op.source, op.target))

    def do_Prune(self, op: Prune) -> None:
        self.both(f"prune({list(op.threads)!r}, strategy={op.strategy!r})", lambda s: s.prune(list(op.threads), strategy=op.strategy))

    def read_back_everything(self) -> None:
        """Both databases, read whole: every listing and every checkpoint put."""
        self.both("list(None)", lambda s: self.listing(s, None), lambda a, b: compare_listing(a, b, None, None))
        for thread in THREADS + ("t4",):
            self.both(
                f"list({{'configurable': {{'thread_id': {thread!r}}}}})",
                lambda s, t=thread: self.listing(s, {"configurable": {"thread_id": t}}),
                lambda a, b: compare_listing(a, b, None, None),
            )
            for ns in NAMESPACES:
                config = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
                self.both(f"get_tuple({config!r})", lambda s, c=config: s.get_tuple(copy.deepcopy(c)))
        for thread, ns, cid in dict.fromkeys(self.puts):
            config = {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": cid}}
            self.both(f"get_tuple({config!r})", lambda s, c=config: s.get_tuple(copy.deepcopy(c)))


def run_sequence(backend: str, official: Any, mine: Any, ops: list) -> None:
    run = Run(backend, official, mine)
    for op in ops:
        run.do(op)
    run.read_back_everything()


# --- the savers ---------------------------------------------------------------


@contextmanager
def sqlite_pair() -> Iterator[tuple[Any, Any]]:
    from langgraph.checkpoint.sqlite import SqliteSaver as Official

    from threadline import SqliteSaver

    with tempfile.TemporaryDirectory(prefix="tl_side_") as d, Official.from_conn_string(str(Path(d) / "official.db")) as official:
        official.setup()
        with SqliteSaver.from_conn_string(str(Path(d) / "threadline.db")) as mine:
            mine.setup()
            yield official, mine


@contextmanager
def postgres_pair() -> Iterator[tuple[Any, Any]]:
    from langgraph.checkpoint.postgres import PostgresSaver as Official

    from threadline import PostgresSaver

    with pg_schemas().fresh() as official_url, pg_schemas().fresh() as mine_url, Official.from_conn_string(official_url) as official:
        official.setup()
        with PostgresSaver.from_conn_string(mine_url) as mine:
            mine.setup()
            yield official, mine


def _official_sqlite() -> type:
    from langgraph.checkpoint.sqlite import SqliteSaver

    return SqliteSaver


def _official_postgres() -> type:
    from langgraph.checkpoint.postgres import PostgresSaver

    return PostgresSaver
