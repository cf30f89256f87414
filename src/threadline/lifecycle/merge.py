"""Branch merge: bring a branch's changes onto another branch's head through the graph's reducers.

``merge(saver, graph, source, into=target)`` compares, per channel, the state at the two
checkpoints with the state at their fork point (their nearest common ancestor):

* a channel with a reducer (``add_messages``, ``operator.add``, a custom one) changed on the
  source side: the source's change since the fork point — list items appended or not at the
  fork point (messages by id), mapping keys changed or added, a number's difference — goes
  through the reducer onto the target's value, whether or not the target changed it too
  (a reducer accumulates: a counter at 1 that each side raised by 2 merges to 5, an item each
  side appended is there twice — equal values on both sides are two changes, not one). When
  no such change, folded into the fork point's value, gives the source's value (an item
  removed, a custom reducer), the change cannot go through the reducer: the source's value
  replaces the target's (LangGraph's ``Overwrite``) — taken when the target did not change
  the channel, else a conflict;
* a channel without a reducer changed on the source side only: the source's value; changed
  on both sides to different values: a conflict (to equal values: nothing to do);
* changed on the target side only, or on neither: kept.

A conflict is resolved per channel by ``choose={channel: "source" | "target"}``: ``"source"``
takes the source's value, ``"target"`` keeps the target's. A choice on a channel without a
conflict applies too (``"target"`` keeps the target's value; on a reducer channel it leaves
the source's change out).

Without ``apply`` it is a preview (``MergeResult``: per channel what changes, the conflicts,
the value each channel would take, computed through the same reducers), nothing written.
With ``apply`` the changes go through ``graph.update_state`` onto the target (one new
checkpoint, source ``update``), whose metadata then names both parents: ``merge: {source,
target, fork_point}`` (``history`` and the browser's branch graph show it as a merge).

Errors: ``ConfigError`` (checkpoints of different threads, no common ancestor, nothing to
merge, an unresolved conflict, a bad choice), ``NotFoundError`` (unknown checkpoint).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from threadline.errors import ConfigError, NotFoundError
from threadline.keys import key_of
from threadline.lifecycle.annotate import annotate_op
from threadline.read.channel import item_key, same_value as _same, summarize
from threadline.read.common import bind_graph, jsonable
from threadline.storage.dialect import Dialect
from threadline.storage.ops import Op, Q

CHOICES = ("source", "target")


@dataclass
class ChannelMerge:
    """One channel of a merge: whether it changed on each side since the fork point, whether
    that is a ``conflict`` (see the module doc), the ``choice`` (``"source"`` / ``"target"``;
    None: an unresolved conflict), ``update`` (what is applied through the graph, when
    ``applies``; with ``replaces`` it replaces the value, bypassing the reducer), ``result``
    (the value after the merge) and a ``summary`` of the change to the target's value."""

    channel: str
    changed_source: bool
    changed_target: bool
    conflict: bool
    reducer: bool
    choice: str | None
    applies: bool
    update: Any
    result: Any
    summary: str
    replaces: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"channel": self.channel, "changed_source": self.changed_source, "changed_target": self.changed_target,
                "conflict": self.conflict, "reducer": self.reducer, "choice": self.choice, "applies": self.applies,
                "replaces": self.replaces, "update": jsonable(self.update), "result": jsonable(self.result), "summary": self.summary}


@dataclass
class MergeResult:
    """A merge of checkpoint ``source`` into ``target`` of ``thread_id`` (fork point ``fork_point``):
    per channel (``channels``), and, once applied, the merge checkpoint ``checkpoint_id``."""

    thread_id: str
    checkpoint_ns: str
    source: str
    target: str
    fork_point: str
    channels: list[ChannelMerge] = field(default_factory=list)
    checkpoint_id: str | None = None

    @property
    def applied(self) -> bool:
        return self.checkpoint_id is not None

    @property
    def conflicts(self) -> list[str]:
        return [c.channel for c in self.channels if c.conflict]

    @property
    def unresolved(self) -> list[str]:
        return [c.channel for c in self.channels if c.conflict and c.choice is None]

    def to_json(self) -> dict[str, Any]:
        return {"thread_id": self.thread_id, "checkpoint_ns": self.checkpoint_ns, "source": self.source, "target": self.target,
                "fork_point": self.fork_point, "applied": self.applied, "checkpoint_id": self.checkpoint_id,
                "conflicts": self.conflicts, "unresolved": self.unresolved, "channels": [c.to_json() for c in self.channels]}


def source_change(before: Any, after: Any) -> Any:
    """What a reducer channel gained from ``before`` to ``after``: the items appended to a list
    that starts with ``before``, else list items not in ``before`` or changed (messages by id);
    mapping keys added or changed; a number's difference; else ``after``."""
    if isinstance(before, (list, tuple)) and isinstance(after, (list, tuple)):
        if len(after) >= len(before) and all(_same(a, b) for a, b in zip(before, after)):
            return list(after[len(before):])
        old = {item_key(x): x for x in before}
        return [x for x in after if item_key(x) not in old or not _same(old[item_key(x)], x)]
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        return {k: v for k, v in after.items() if k not in before or not _same(before[k], v)}
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (before, after)):
        return after - before
    return after


def _reduced(channel: Any, value: Any, present: bool, update: Any) -> Any:
    """The value of ``channel`` (a compiled graph's channel) holding ``value`` (or, not
    ``present``, nothing yet) once ``update`` goes through it, as LangGraph applies a write."""
    ch = channel.from_checkpoint(value) if present else channel.copy()
    ch.update([update])
    return ch.get()


def _lineage_op(d: Dialect, thread_id: str, checkpoint_ns: str) -> Op[dict[str, str | None]]:
    return {r[0]: r[1] for r in (yield Q(d.NAMESPACE_CHECKPOINTS, (thread_id, checkpoint_ns)))}


def fork_point(parent: Mapping[str, str | None], a: str, b: str) -> str | None:
    """The nearest common ancestor of checkpoints ``a`` and ``b`` (either itself included), or None."""
    seen: set[str] = set()
    cur: str | None = b
    while cur in parent and cur not in seen:
        seen.add(cur)
        cur = parent[cur]
    cur, walked = a, set()
    while cur in parent and cur not in walked:
        if cur in seen:
            return cur
        walked.add(cur)
        cur = parent[cur]
    return None


def _ids(source: Any, into: Any) -> tuple[str, str, str, str]:
    s, t = key_of(source), key_of(into)
    if s.thread_id != t.thread_id or s.checkpoint_ns != t.checkpoint_ns:
        raise ConfigError(f"merge works within one thread and namespace: source is in thread {s.thread_id!r}, target in {t.thread_id!r}")
    if not s.checkpoint_id or not t.checkpoint_id:
        raise ConfigError("merge needs the source's and the target's checkpoint_id")
    return s.thread_id, s.checkpoint_ns, s.checkpoint_id, t.checkpoint_id


def _config(thread_id: str, ns: str, cid: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cid}}


def merge(
    saver: Any,
    graph: Any,
    source: Any,
    *,
    into: Any,
    choose: Mapping[str, str] | None = None,
    apply: bool = False,
    as_node: str | None = None,
) -> MergeResult:
    """Merge checkpoint ``source`` into checkpoint ``into`` (both ``RunnableConfig``\\ s of one
    thread with a checkpoint_id) through ``graph`` (a compiled graph; see the module doc).

    ``choose``: channel → ``"source"`` or ``"target"`` for conflicts (a choice on a channel
    without a conflict applies too: ``"target"`` keeps the target's value). ``apply``: write the
    merge checkpoint (else a preview); ``as_node``: the node the update is written as (default:
    LangGraph's rule, the last node that wrote the target). Returns a ``MergeResult``."""
    tid, ns, src, dst = _ids(source, into)
    choose = dict(choose or {})
    for ch, side in choose.items():
        if side not in CHOICES:
            raise ConfigError(f"choice for channel {ch!r} must be 'source' or 'target', got {side!r}")
    parent = saver.run(_lineage_op(saver.dialect, tid, ns))
    for cid in (src, dst):
        if cid not in parent:
            raise NotFoundError(f"no checkpoint {cid!r} in thread {tid!r}")
    base = fork_point(parent, src, dst)
    if base is None:
        raise ConfigError(f"checkpoints {src} and {dst} of thread {tid!r} share no ancestor: nothing to merge from")
    if base == src:
        raise ConfigError(f"{src} is already in the history of {dst}: nothing to merge")
    g = bind_graph(graph, saver)
    f, s, t = (g.get_state(_config(tid, ns, c)).values for c in (base, src, dst))
    unknown = sorted(set(choose) - (set(f) | set(s) | set(t)))
    if unknown:
        raise ConfigError(f"no channel {unknown[0]!r} in the state (channels: {', '.join(sorted(set(f) | set(s) | set(t)))})")
    result = MergeResult(tid, ns, src, dst, base)
    for ch in sorted(set(f) | set(s) | set(t)):
        before, theirs, ours = f.get(ch), s.get(ch), t.get(ch)
        changed_s = not _same(before, theirs) or (ch in f) != (ch in s)
        changed_t = not _same(before, ours) or (ch in f) != (ch in t)
        channel = getattr(g, "channels", {}).get(ch)
        reducer = callable(getattr(channel, "operator", None))
        update, replaces = theirs, False
        if reducer and changed_s:
            # the source's change must go through the reducer, even onto an equal value: equal is not the same change
            update = source_change(before, theirs)
            replaces = not _same(_reduced(channel, before, ch in f, update), theirs)
            update = theirs if replaces else update
            conflict = changed_t and replaces
        else:
            conflict = changed_s and changed_t and not _same(theirs, ours)
        taken = changed_s and (not changed_t or (reducer and not replaces))
        choice = choose.get(ch) or (None if conflict else "source" if taken else "target")
        applies = changed_s and choice == "source"
        value = ours
        if applies:
            value = _reduced(channel, ours, ch in t, update) if reducer and not replaces else theirs
        elif choice is None:
            value = None
        summary = "conflict: choose source or target" if choice is None else summarize(ours, value, existed=ch in t)
        result.channels.append(ChannelMerge(ch, changed_s, changed_t, conflict, reducer, choice, applies,
                                            update if applies else None, value, summary, replaces and applies))
    if not apply:
        return result
    if result.unresolved:
        raise ConfigError(f"conflicts on {', '.join(result.unresolved)}: changed on both sides since {base}; choose a side "
                          "for each (choose={channel: 'source' | 'target'})", flags={"choose={channel: 'source' | 'target'}": "--take CHANNEL=source|target"})
    from langgraph.types import Overwrite  # imported here: `threadline show` loads this module without LangGraph's runtime

    updates = {c.channel: Overwrite(c.update) if c.replaces else c.update for c in result.channels if c.applies}
    if not updates:
        raise ConfigError(f"nothing to merge: {src} changed no channel the target takes")
    written = g.update_state(_config(tid, ns, dst), updates, as_node=as_node)
    cid = written["configurable"]["checkpoint_id"]
    saver.run(annotate_op(saver.dialect, tid, ns, cid, {"merge": {"source": src, "target": dst, "fork_point": base}}, saver.blob_codec),
              write=True)
    after = g.get_state(_config(tid, ns, cid)).values
    for c in result.channels:
        c.result = after.get(c.channel)
    result.checkpoint_id = cid
    return result
