"""Storage format 2, inline channels: a checkpoint's channels that hold None or are empty need no
blob row. Their versions are kept in the checkpoint's stored document, as the official
PostgresSaver keeps primitive values inline: ``NULLS`` ({channel: version} of the channels holding
None) and ``EMPTIES`` (of the empty ones: given a version without a value, or unchanged since a
parent that holds them so), taken out of the stored ``channel_versions``, which then names only the
channels with a blob row: what every blob statement and ``rows.blob_pairs`` read. ``all_versions``
gives LangGraph's ``channel_versions`` back; ``rows.to_tuple`` puts the None values back.

Each document is complete on its own: no channel's null or empty status is looked up in another
row when it is read. The document is covered by the checkpoint row's checksum (``codec.seal``), so
these maps are as protected as the versions were.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import compress, filterfalse, repeat
from operator import eq, is_
from typing import Any, NamedTuple

from threadline.errors import CorruptRowError

NULLS = "__none__"  # (not "null": a document holding the word goes to json, ``jsontext._has_null``)
EMPTIES = "__empty__"
_INLINE = (NULLS, EMPTIES)


class Plan(NamedTuple):
    """A put's channels that need no blob row (``plan``): those holding None, those given a new
    version without a value, and those ``left`` without a value or a new version (empty where the
    parent holds them so at that version, else their version names a blob)."""

    nulls: set[str]
    emptied: set[str]
    left: set[str]


def plan(doc: Mapping[str, Any], values: Any, new_versions: Mapping[str, Any]) -> Plan | None:
    """Which of a put's ``doc``'s channels go to its ``NULLS`` / ``EMPTIES`` (``apply``), or None when
    none may: those holding None in the checkpoint's ``values`` (as the official PostgresSaver keeps
    primitive values, whatever ``new_versions`` says), those ``new_versions`` gives a version without a
    value, and those without either that the parent holds empty (``Plan.left``; the official
    PostgresSaver reads such a channel from its blob, and so does a put whose parent does not hold
    it empty). Set operations in C: no pass per channel in Python (a wide graph names hundreds)."""
    versions = doc.get("channel_versions")
    if type(versions) is not dict or not isinstance(values, dict) or not versions:
        return None
    empty = versions.keys() - values.keys()
    none = list(map(is_, values.values(), repeat(None)))  # by identity: ``==`` would call a value's ``__eq__``
    nulls = versions.keys() & set(compress(values, none)) if True in none else set()
    if not empty and not nulls:
        return None
    emptied = empty & new_versions.keys()
    return Plan(nulls, emptied, empty - emptied if emptied else empty)


def apply(doc: dict[str, Any], planned: Plan, parent: Mapping[str, Any] | None) -> None:
    """Move ``planned``'s channels out of ``doc``'s ``channel_versions`` (its order kept) into its
    ``NULLS`` and ``EMPTIES``: the left ones only where ``parent`` (the parent checkpoint's
    ``EMPTIES``; None: not known) holds them empty at the same version."""
    versions = doc["channel_versions"]
    inherited = _inherited(planned.left, versions, parent) if planned.left and parent else {}
    if not (planned.nulls or planned.emptied or inherited):
        return
    kept = filterfalse((planned.nulls | planned.emptied).__contains__, versions)
    kept = list(filterfalse(inherited.__contains__, kept) if inherited else kept)
    doc["channel_versions"] = dict(zip(kept, map(versions.__getitem__, kept)))
    if planned.nulls:
        doc[NULLS] = dict(zip(planned.nulls, map(versions.__getitem__, planned.nulls)))
    if planned.emptied or inherited:
        doc[EMPTIES] = {**inherited, **dict(zip(planned.emptied, map(versions.__getitem__, planned.emptied)))}


def _inherited(left: set[str], versions: Mapping[str, Any], parent: Mapping[str, Any]) -> dict[str, Any]:
    """Channel → version of the ``left`` channels that ``parent`` holds empty at the same version.
    Most often that is the parent's whole map (a chain of nodes empties one more trigger each step):
    checked in C and copied whole; else compared one by one (compared, not hashed: a version is a
    long string, new to this put)."""
    if len(left) == len(parent) and parent.items() <= versions.items() and left <= parent.keys():
        return dict(parent)
    named = list(left)
    same = list(compress(named, map(eq, map(parent.get, named), map(versions.__getitem__, named))))
    return dict(zip(same, map(versions.__getitem__, same)))


def inline_maps(doc: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """A stored doc's (``NULLS``, ``EMPTIES``) maps of channel → version (empty for a doc without them).

    Raises CorruptRowError when one is not a mapping of channel names to versions."""
    found = []
    for name in _INLINE:
        m = doc.get(name)
        if m is None:
            found.append({})
        elif type(m) is dict and all(type(v) in (str, int, float) for v in m.values()):
            found.append(m)
        else:
            raise CorruptRowError(f"checkpoint {doc.get('id')!r}: {name} is not a mapping of channel to version")
    return found[0], found[1]


def all_versions(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Every channel version a stored doc names, its inline channels' too: LangGraph's ``channel_versions``."""
    versions = doc.get("channel_versions") or {}
    if NULLS not in doc and EMPTIES not in doc:
        return versions
    nulls, empties = inline_maps(doc)
    return {**versions, **nulls, **empties}
