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
from typing import Any

from threadline.errors import CorruptRowError

NULLS = "__none__"  # (not "null": a document holding the word goes to json, ``jsontext._has_null``)
EMPTIES = "__empty__"
_INLINE = (NULLS, EMPTIES)


def split_inline(doc: dict[str, Any], values: Any, new_versions: Mapping[str, Any]) -> set[str]:
    """Move the channels of a put's ``doc`` that need no blob row out of its ``channel_versions``:
    those holding None in the checkpoint's ``values`` to ``NULLS`` (as the official PostgresSaver
    keeps primitive values, whatever ``new_versions`` says), and those ``new_versions`` gives a
    version without a value to ``EMPTIES``. Returns the channels left that have no value and no new
    version: each is empty where the parent holds it so at that version (``inherit_empties``), else
    its version names a blob (the official PostgresSaver reads such a channel from its blob too).
    Set operations in C: no pass per channel in Python (a wide graph names hundreds)."""
    versions = doc.get("channel_versions")
    if type(versions) is not dict or not isinstance(values, dict) or not versions:
        return set()
    empty = versions.keys() - values.keys()
    none = list(map(is_, values.values(), repeat(None)))  # by identity: ``==`` would call a value's ``__eq__``
    nulls = versions.keys() & set(compress(values, none)) if True in none else set()
    if not empty and not nulls:
        return set()
    emptied = empty & new_versions.keys()
    if nulls or emptied:
        _move(doc, versions, nulls | emptied, {NULLS: nulls, EMPTIES: emptied}, versions)
    return empty - emptied


def inherit_empties(doc: dict[str, Any], channels: set[str], parent: Mapping[str, Any]) -> bool:
    """Move ``channels`` (``split_inline``'s) that the ``parent`` checkpoint holds empty at the same
    version (its ``EMPTIES``) to ``doc``'s: a value unchanged since the parent. Whether any moved."""
    versions = doc["channel_versions"]
    named = list(channels)
    # compared, not hashed: a version is a long string, new to this put
    moved = set(compress(named, map(eq, map(parent.get, named), map(versions.__getitem__, named))))
    if moved:
        _move(doc, versions, moved, {EMPTIES: moved}, versions)
    return bool(moved)


def _move(doc: dict[str, Any], versions: dict[str, Any], moved: set[str], into: Mapping[str, set[str]], source: Mapping[str, Any]) -> None:
    """Take ``moved`` out of ``doc``'s ``channel_versions`` (``versions``, its order kept) and add each
    set of ``into`` to the doc's map of that name, their versions from ``source``. In C: a 100-node
    graph's put moves about fifty channels."""
    kept = list(filterfalse(moved.__contains__, versions))
    doc["channel_versions"] = dict(zip(kept, map(versions.__getitem__, kept)))
    for name, channels in into.items():
        if channels:
            doc[name] = {**doc.get(name, {}), **dict(zip(channels, map(source.__getitem__, channels)))}


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
