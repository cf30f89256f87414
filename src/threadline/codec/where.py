"""Where a value cannot be serialized: the path to the part the serializer refused.

Used only after the serializer has raised (``tags.encode``), so a value that serializes
costs nothing here. ``unserializable`` walks the value the way LangGraph's serializer takes
it apart — mappings by key, lists, tuples, sets and deques by position, pydantic models,
dataclasses, named tuples and ``Send`` packets by field — and descends into the first child
that does not serialize on its own, until it reaches a part none of whose children fail:
that part is the culprit (``messages[3].additional_kwargs.lock``, a ``_thread.lock``).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.types import SendProtocol

from threadline.errors import SerializationError

# A walk ends here: a deeper culprit is named by the last level reached.
MAX_DEPTH = 64


def _step(key: Any) -> str:
    """One step of a path: ``.name`` for an identifier, ``[3]`` for a position, ``['a b']`` else."""
    if isinstance(key, str) and key.isidentifier():
        return f".{key}"
    return f"[{key!r}]"


def _children(value: Any) -> Iterator[tuple[Any, Any]]:
    """(key, child) of the parts the serializer encodes separately; none for a leaf."""
    if isinstance(value, Mapping):
        yield from value.items()
    elif isinstance(value, (list, tuple, deque)) and not hasattr(value, "_asdict"):
        yield from enumerate(value)
    elif isinstance(value, (set, frozenset)):
        yield from enumerate(value)
    elif hasattr(value, "_asdict") and callable(value._asdict):  # named tuple
        yield from value._asdict().items()
    elif isinstance(getattr(type(value), "model_fields", None), Mapping):  # pydantic v2
        for name in type(value).model_fields:
            yield name, getattr(value, name, None)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield f.name, getattr(value, f.name, None)
    elif isinstance(value, SendProtocol):  # as the serializer tests it (runtime-checkable)
        yield "arg", value.arg


def _serializes(serde: SerializerProtocol, value: Any) -> bool:
    try:
        serde.dumps_typed(value)
    except Exception:  # noqa: BLE001 - any refusal marks the part
        return False
    return True


def culprit(serde: SerializerProtocol, value: Any) -> tuple[str, Any]:
    """The path (``"[3].additional_kwargs.lock"``; ``""`` for ``value`` itself) to the innermost
    part of ``value`` that ``serde`` refuses whose children all serialize, and that part."""
    path = ""
    for _ in range(MAX_DEPTH):
        for key, child in _children(value):
            if not _serializes(serde, child):
                path, value = path + _step(key), child
                break
        else:
            break
    return path, value


def type_name(value: Any) -> str:
    """``module.QualName`` of the value's type (``_thread.lock``); builtins by their bare name."""
    t = type(value)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def unserializable(
    serde: SerializerProtocol, value: Any, exc: BaseException, channel: str | None, task_id: str | None
) -> SerializationError:
    """The ``SerializationError`` for ``value`` of ``channel`` (a pending write when ``task_id``),
    which ``serde`` refused with ``exc``: where (the channel, the path in the value) and what type."""
    try:
        path, part = culprit(serde, value)
    except Exception:  # noqa: BLE001 - a value that breaks the walk is still named by its type
        path, part = "", value
    root = channel if channel is not None else "value"
    where = root + path
    if channel is None:
        place = "a value"
    elif task_id is None:
        place = f"channel {channel!r}"
    else:
        place = f"the pending write of task {task_id!r} to channel {channel!r}"
    kind = type_name(part)
    message = (
        f"cannot serialize {place}: {where} is of type {kind}, which the serializer does not store "
        f"({type(exc).__name__}: {exc}); keep such objects out of the graph's state "
        "(store an id or a plain copy instead)"
    )
    return SerializationError(message, channel=channel, task_id=task_id, path=where, type_name=kind)
