"""Names people type for threads and checkpoints, resolved the way git resolves revisions.

A checkpoint may be named, within one thread and ``checkpoint_ns``, by:

* its full ``checkpoint_id``;
* a unique run of at least ``MIN_DIGITS`` (6) of its hex digits — dashes are ignored
  and a leading ``…`` is dropped, so the short form ``abbreviate`` gives (the last 8 hex
  digits, as tables and the demo print them) is accepted as shown, and so is any run of
  6 or more of those digits (``7fd56a`` of ``7fd56a87``). A prefix or suffix of the id is
  preferred to a run inside it: a run inside an id counts only when no id starts or ends
  with the digits;
* ``HEAD``: the thread's head, its largest checkpoint_id (what LangGraph's
  ``get_tuple`` without a checkpoint_id loads);
* ``step:N``: the checkpoint whose metadata step is N on the head's branch (the head
  and its ancestors); when several share the step (a rollback repeats its target's
  step), the one nearest the head;
* a tag (``threadline tag THREAD CHECKPOINT golden``, ``read.tags``): the checkpoint it names;

each optionally followed, as in git, by ``~N`` (N parents up; ``~`` is ``~1``) and ``^``
(one parent up; ``^^`` two) in any sequence: ``HEAD~2``, ``HEAD^``, ``7fd56a87^``,
``step:3~1``. A checkpoint has one parent, so ``^1`` is ``^``, ``^0`` the checkpoint
itself, and ``^2`` (git's second parent of a merge) is an error.

Thread ids are matched exactly, or as glob patterns (``*``, ``?``, ``[…]``,
``fnmatch`` rules, case-sensitive) by ``expand_threads``. A thread is known when the
database holds anything of it (a row of any table; on Redis, any of its keys).

Errors: ``NotFoundError`` when nothing matches, ``AmbiguousNameError`` (also a
``LookupError``) when a short name matches several checkpoints — its message lists them.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence
from typing import Any

from threadline.errors import NotFoundError, ThreadlineError
from threadline.keys import thread_id_of
from threadline.read.tags import check_tag_name, tag_named_op
from threadline.storage.dialect import Dialect
from threadline.storage.ops import Op, Q

MIN_DIGITS = 6
SHORT_DIGITS = 8
_HEX = re.compile(r"^[0-9a-f]+$")
_MOVES = re.compile(r"(?:[~^]\d*)+$")
_MOVE = re.compile(r"([~^])(\d*)")
_STEP = re.compile(r"^step:(-?\d+)$", re.IGNORECASE)
_GLOB = re.compile(r"[*?\[]")
_HELP = "give a full checkpoint_id, 6 or more of its hex digits, a tag, HEAD, HEAD~N or step:N (any of them followed by ~N or ^, as in git: HEAD^)"


class AmbiguousNameError(ThreadlineError, LookupError):
    """A short checkpoint name matches several checkpoints; the message lists them."""


def _digits(checkpoint_id: str) -> str:
    return checkpoint_id.replace("-", "").lower()


def abbreviate(checkpoint_ids: Iterable[str], digits: int = SHORT_DIGITS) -> dict[str, str]:
    """``{checkpoint_id: short form}``: the last ``digits`` hex digits, more where two ids
    of the set would share them (as git lengthens an ambiguous abbreviation)."""
    ids = list(dict.fromkeys(checkpoint_ids))
    full = {cid: _digits(cid) for cid in ids}
    out: dict[str, str] = {}
    n = digits
    pending = ids
    while pending:
        seen: dict[str, list[str]] = {}
        for cid in pending:
            seen.setdefault(full[cid][-n:], []).append(cid)
        pending = []
        for suffix, group in seen.items():
            if len(group) == 1 or n >= max(len(full[c]) for c in group):
                for cid in group:
                    out[cid] = full[cid][-n:] if len(group) == 1 else cid
            else:
                pending += group
        n += 2
    return out


def short(checkpoint_id: str | None) -> str:
    """The short form of one checkpoint_id: its last 8 hex digits ("-" for None)."""
    return _digits(checkpoint_id)[-SHORT_DIGITS:] if checkpoint_id else "-"


def known_thread_op(d: Dialect, thread_id: Any) -> Op[bool]:
    """Whether the database holds anything of ``thread_id`` (a row of any table, a key on Redis)."""
    return bool((yield Q(*d.known_thread(thread_id_of(thread_id)))))


def match_threads(patterns: Sequence[str], thread_ids: Iterable[str]) -> list[str]:
    """The ``thread_ids`` each pattern names (an exact id, or a glob), in pattern order, without repeats.

    Raises NotFoundError naming the first id that is not among them or pattern that matches none."""
    known = sorted(set(thread_ids))
    found: list[str] = []
    for pattern in patterns:
        matched = [t for t in known if fnmatch.fnmatchcase(t, pattern)] if _GLOB.search(pattern) else [pattern] * (pattern in known)
        if not matched:
            raise NotFoundError(f"no thread matches {pattern!r}" if _GLOB.search(pattern) else f"unknown thread {pattern!r}")
        found += matched
    return list(dict.fromkeys(found))


def resolve_thread_op(d: Dialect, thread_id: Any) -> Op[str]:
    """``thread_id`` when the database holds anything of it (``known_thread_op``); NotFoundError otherwise."""
    tid = thread_id_of(thread_id)
    if not (yield from known_thread_op(d, tid)):
        raise NotFoundError(f"unknown thread {tid!r}")
    return tid


def expand_threads_op(d: Dialect, patterns: Sequence[str]) -> Op[list[str]]:
    """Thread ids named by ``patterns`` (exact ids or globs) in this database; see ``match_threads``."""
    candidates: list[str] = []
    for pattern in map(thread_id_of, patterns):
        if not _GLOB.search(pattern):
            if (yield from known_thread_op(d, pattern)):
                candidates.append(pattern)
            continue
        rows = yield Q(*d.threads_with_prefix(_GLOB.split(pattern, 1)[0]))
        candidates += [r[0] for r in rows]
    return match_threads(patterns, candidates)


def resolve_checkpoint_op(d: Dialect, thread_id: Any, name: str, checkpoint_ns: str = "") -> Op[str]:
    """The full checkpoint_id ``name`` stands for in ``thread_id``'s ``checkpoint_ns`` (see the module doc).

    Raises NotFoundError (unknown thread, no such checkpoint) or AmbiguousNameError."""
    tid = thread_id_of(thread_id)
    if not isinstance(name, str) or not name.strip():
        raise NotFoundError(f"empty checkpoint name: {_HELP}")
    text = name.strip()
    exact = yield Q(d.CHECKPOINT_ID, (tid, checkpoint_ns, text))
    if exact:
        return exact[0][0]
    rows = yield Q(d.NAMESPACE_CHECKPOINTS, (tid, checkpoint_ns))
    where = f"thread {tid!r}" + (f" (checkpoint_ns {checkpoint_ns!r})" if checkpoint_ns else "")
    if not rows:
        yield from resolve_thread_op(d, tid)
        raise NotFoundError(f"{where} has no checkpoint")
    base, _ = _split_moves(text)
    tagged = None
    if _may_be_tag(base):
        found = yield from tag_named_op(d, tid, base)
        if found is not None and found[0] == checkpoint_ns:
            tagged = found[1]
    return _resolve(text, rows, where, tagged)


def _may_be_tag(base: str) -> bool:
    try:
        check_tag_name(base)
    except ThreadlineError:
        return False
    return True


def _split_moves(text: str) -> tuple[str, str]:
    """A name's base and its ``~N``/``^`` moves."""
    found = _MOVES.search(text)
    return (text[:found.start()], found.group()) if found and found.start() else (text, "")


def _parents_up(text: str, moves: str) -> int:
    """How many parents up ``~N``/``^`` moves go (``~`` = ``~1``, ``^`` = ``^1``, ``^0`` = 0)."""
    n = 0
    for op, count in _MOVE.findall(moves):
        if op == "~":
            n += int(count or 1)
        elif count in ("", "1"):
            n += 1
        elif int(count) != 0:
            raise NotFoundError(f"{text!r}: a checkpoint has one parent, so ^{count} names none; "
                                f"^ (or ^1) is the parent, ~{count} goes {count} parents up")
    return n


def _resolve(text: str, rows: list, where: str, tagged: str | None = None) -> str:
    parent = {r[0]: r[1] for r in rows}
    step = {r[0]: r[2] for r in rows}
    base, moves = _split_moves(text)
    up = _parents_up(text, moves)
    cur: str | None = tagged if tagged in parent else _base(base, text, parent, step, rows[-1][0], where)
    for _ in range(up):
        cur = parent.get(cur) if cur else None
    if cur is None or cur not in parent:
        raise NotFoundError(f"{text} goes past the first checkpoint of {where}")
    return cur


def _base(base: str, text: str, parent: dict, step: dict, head: str, where: str) -> str:
    """The checkpoint a name names before its ``~``/``^`` moves: HEAD, step:N or hex digits."""
    if base.upper() == "HEAD":
        return head
    if m := _STEP.match(base):
        wanted, cur, seen = int(m.group(1)), head, set()
        while cur in parent and cur not in seen:
            if step[cur] == wanted:
                return cur
            seen.add(cur)
            cur = parent[cur]
        raise NotFoundError(f"no checkpoint at step {wanted} on the head's branch of {where}")
    digits = _digits(base.lstrip("…").lstrip("."))
    if len(digits) < MIN_DIGITS or not _HEX.match(digits):
        raise NotFoundError(f"no checkpoint {text!r} in {where}: {_HELP}")
    # an end of the id first (what git and the full id read as), then a run inside it (a short id's first digits)
    matches = [cid for cid in parent if _digits(cid).startswith(digits) or _digits(cid).endswith(digits)]
    if not matches:
        matches = [cid for cid in parent if digits in _digits(cid)]
    if not matches:
        raise NotFoundError(f"no checkpoint {base!r} in {where}: {_HELP}")
    if len(matches) > 1:
        shown = ", ".join(f"{cid} (step {step[cid]})" for cid in matches[:10])
        more = f" and {len(matches) - 10} more" if len(matches) > 10 else ""
        raise AmbiguousNameError(f"{base!r} matches {len(matches)} checkpoints in {where}: {shown}{more}; give more digits")
    return matches[0]


def resolve_checkpoint(saver: Any, thread_id: Any, name: str, *, checkpoint_ns: str = "") -> str:
    """Sync ``resolve_checkpoint_op``."""
    return saver.run(resolve_checkpoint_op(saver.dialect, thread_id, name, checkpoint_ns))


def expand_threads(saver: Any, patterns: Sequence[str]) -> list[str]:
    """Sync ``expand_threads_op``."""
    return saver.run(expand_threads_op(saver.dialect, patterns))


def resolve_thread(saver: Any, thread_id: Any) -> str:
    """Sync ``resolve_thread_op``."""
    return saver.run(resolve_thread_op(saver.dialect, thread_id))
