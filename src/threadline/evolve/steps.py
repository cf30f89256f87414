"""The migration steps a ``Migrations`` registry holds, each a pure function of one stored
checkpoint (``Draft``): ``RenameChannel``, ``DropChannel``, ``RenameNode``, ``Transform``.

A step changes the checkpoint's ``channel_values``, ``channel_versions``, ``versions_seen``
(and ``updated_channels``) and its pending writes together, so LangGraph schedules the same
tasks after the step as before it. A channel whose stored value no longer matches its
(channel, version) key — renamed (with a value or empty), or changed under a new version —
is listed in ``Draft.unstored``: it is written with the next checkpoint put on the migrated one
(``evolve.lens``, ``evolve.batch``), so every version a checkpoint names is stored.
"""

from __future__ import annotations

import hashlib

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from threadline.storage import rows as R

TASKS = "__pregel_tasks"
BRANCH = "branch:to:"


@dataclass
class Draft:
    """One checkpoint being migrated: a copy of its checkpoint dict and pending writes
    (``(task_id, channel, value)`` triples), and ``unstored``: channel → version whose value the
    store does not hold under that key yet."""

    checkpoint: dict[str, Any]
    writes: list[tuple[str, str, Any]]
    unstored: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, checkpoint: dict[str, Any], writes: Any) -> Draft:
        ck = dict(checkpoint)
        ck["channel_values"] = dict(ck.get("channel_values") or {})
        ck["channel_versions"] = dict(ck.get("channel_versions") or {})
        ck["versions_seen"] = {k: dict(v) for k, v in (ck.get("versions_seen") or {}).items()}
        if ck.get("updated_channels") is not None:
            ck["updated_channels"] = list(ck["updated_channels"])
        return cls(ck, [tuple(w) for w in writes or ()])  # type: ignore[misc]

    def rename(self, old: str, new: str) -> bool:
        """Move channel ``old`` to ``new`` everywhere; False when the checkpoint has no ``old``.
        ValueError when it holds both."""
        ck = self.checkpoint
        values, versions = ck["channel_values"], ck["channel_versions"]
        has = old in values or old in versions or any(w[1] == old for w in self.writes)
        if not has:
            return False
        if new in values or new in versions:
            raise ValueError(f"the checkpoint holds both channel {old!r} and {new!r}")
        if old in values:
            values[new] = values.pop(old)
        if old in versions:
            # stored under the new name even when empty (a consumed ``branch:to:`` channel): a
            # checkpoint names no (channel, version) the store does not hold
            versions[new] = versions.pop(old)
            self.unstored[new] = versions[new]
        self.unstored.pop(old, None)
        for seen in ck["versions_seen"].values():
            if old in seen:
                seen[new] = seen.pop(old)
        if ck.get("updated_channels") is not None:
            ck["updated_channels"] = [new if c == old else c for c in ck["updated_channels"]]
        self.writes = [(t, new if c == old else c, v) for t, c, v in self.writes]
        return True

    def drop(self, name: str) -> bool:
        ck = self.checkpoint
        found = name in ck["channel_values"] or name in ck["channel_versions"] or any(w[1] == name for w in self.writes)
        ck["channel_values"].pop(name, None)
        ck["channel_versions"].pop(name, None)
        self.unstored.pop(name, None)
        for seen in ck["versions_seen"].values():
            seen.pop(name, None)
        if ck.get("updated_channels") is not None:
            ck["updated_channels"] = [c for c in ck["updated_channels"] if c != name]
        self.writes = [w for w in self.writes if w[1] != name]
        return found


def _version_after(old: Any, salt: str) -> str:
    """The version a transformed value is presented under: the next counter (``rows.next_version``)
    with a fraction derived from ``old`` and the step, so every read presents the same version."""
    counter = R.next_version(old).split(".", 1)[0]
    fraction = int.from_bytes(hashlib.blake2b(f"{old}|{salt}".encode(), digest_size=6).digest(), "big") / 2**48
    return f"{counter}.{fraction:016}"


def new_version(draft: Draft, channel: str, salt: str) -> None:
    """Present ``channel``'s changed value under a new version (``_version_after``; what nodes saw
    of the old one, they see of the new): a stored (channel, version) never changes its value."""
    ck = draft.checkpoint
    old = ck["channel_versions"].get(channel)
    new = _version_after(old, salt)
    ck["channel_versions"][channel] = new
    for seen in ck["versions_seen"].values():
        if channel in seen and seen[channel] == old:
            seen[channel] = new
    draft.unstored[channel] = new


@dataclass(frozen=True)
class Step:
    """A named migration step; ``apply(draft)`` returns whether it changed anything."""

    name: str

    def apply(self, draft: Draft) -> bool:  # pragma: no cover - every step overrides it
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover
        raise NotImplementedError


@dataclass(frozen=True)
class RenameChannel(Step):
    old: str = ""
    new: str = ""

    def apply(self, draft: Draft) -> bool:
        return draft.rename(self.old, self.new)

    def describe(self) -> str:
        return f"rename channel {self.old!r} to {self.new!r}"


@dataclass(frozen=True)
class DropChannel(Step):
    channel: str = ""

    def apply(self, draft: Draft) -> bool:
        return draft.drop(self.channel)

    def describe(self) -> str:
        return f"drop channel {self.channel!r}"


def _send_to(value: Any, old: str, new: str) -> Any:
    """A ``Send`` to ``old`` re-addressed to ``new`` (anything else unchanged)."""
    if type(value).__name__ == "Send" and getattr(value, "node", None) == old:
        from langgraph.types import Send

        return Send(new, value.arg)
    return value


@dataclass(frozen=True)
class RenameNode(Step):
    """Move what waits for node ``old`` to node ``new``: its trigger channels (``branch:to:``,
    ``join:…:``), its ``versions_seen``, and pending ``Send`` tasks. An interrupt pending in
    ``old`` is answered by ``new`` when the thread resumes: ``new`` runs again from its start."""

    old: str = ""
    new: str = ""

    def apply(self, draft: Draft) -> bool:
        ck = draft.checkpoint
        changed = draft.rename(BRANCH + self.old, BRANCH + self.new)
        for ch in [c for c in ck["channel_versions"] if c.startswith("join:") and c.rsplit(":", 1)[-1] == self.old]:
            changed = draft.rename(ch, ch.rsplit(":", 1)[0] + ":" + self.new) or changed
        seen = ck["versions_seen"]
        if self.old in seen:
            if self.new in seen:
                raise ValueError(f"the checkpoint has versions_seen for both node {self.old!r} and {self.new!r}")
            seen[self.new] = seen.pop(self.old)
            changed = True
        sends = ck["channel_values"].get(TASKS)
        if isinstance(sends, list):
            moved = [_send_to(s, self.old, self.new) for s in sends]
            if any(a is not b for a, b in zip(moved, sends)):
                ck["channel_values"][TASKS] = moved
                new_version(draft, TASKS, self.name)
                changed = True
        writes = [(t, c, _send_to(v, self.old, self.new) if c == TASKS else v) for t, c, v in draft.writes]
        if any(a[2] is not b[2] for a, b in zip(writes, draft.writes)):
            draft.writes = writes
            changed = True
        return changed

    def describe(self) -> str:
        return f"rename node {self.old!r} to {self.new!r}"


@dataclass(frozen=True)
class Transform(Step):
    """Replace channel ``channel``'s value by ``fn(value)`` (under a new version, so the store
    keeps the old value under the old one); with ``writes``, each pending write's value on the
    channel by ``writes(value)``."""

    channel: str = ""
    fn: Callable[[Any], Any] | None = None
    writes: Callable[[Any], Any] | None = None

    def apply(self, draft: Draft) -> bool:
        ck = draft.checkpoint
        changed = False
        if self.channel in ck["channel_values"]:
            assert self.fn is not None
            ck["channel_values"][self.channel] = self.fn(ck["channel_values"][self.channel])
            new_version(draft, self.channel, self.name)
            changed = True
        if self.writes is not None:
            draft.writes = [(t, c, self.writes(v) if c == self.channel else v) for t, c, v in draft.writes]
            changed = changed or any(w[1] == self.channel for w in draft.writes)
        return changed

    def describe(self) -> str:
        return f"transform channel {self.channel!r}" + (" and its pending writes" if self.writes else "")
