"""Decoded values the blob cache keeps, and the fresh copies it hands out.

LangGraph hands a checkpoint's channel values to user code, which may mutate them
(append to a message list, edit a message's ``tool_calls``). So a decoded value the
cache keeps is private: it is never returned itself, only ``fresh`` copies of it, each
as independent of the kept value and of every other copy as a new deserialization
would be. A copy is built without validation (``object.__new__`` and the instance's
state), about 3× faster than deserializing LangChain messages.

``private(value)`` is the copy to keep, or None when the value holds anything this
module cannot copy exactly: only plain data (``dict``, ``list``, ``tuple``, ``set`` of
exact built-in types), immutable scalars, and pydantic models whose whole state is
pydantic's four instance slots (LangChain messages qualify) are copied; anything else
is deserialized every time, as before.
"""

from __future__ import annotations

import datetime
import decimal
import uuid
from typing import Any

_SCALARS = frozenset(
    {str, bytes, int, float, bool, complex, type(None), datetime.datetime, datetime.date, datetime.time,
     datetime.timedelta, uuid.UUID, decimal.Decimal}
)
_MODEL_SLOTS = frozenset({"__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__"})
_MODELS: dict[type, bool] = {}
_new = object.__new__
_set = object.__setattr__


class NotCopyable(TypeError):
    """A value holds an object ``fresh`` cannot copy exactly."""


def _model(cls: type) -> bool:
    """A pydantic v2 model class whose instances hold nothing but pydantic's four slots."""
    found = _MODELS.get(cls)
    if found is None:
        slots: set[str] = set()
        for k in cls.__mro__:
            s = vars(k).get("__slots__", ())
            slots.update((s,) if isinstance(s, str) else s)
        found = _MODELS[cls] = hasattr(cls, "__pydantic_decorators__") and slots <= _MODEL_SLOTS and "__dict__" in slots
    return found


def fresh(value: Any) -> Any:
    """A deep copy of ``value`` sharing only immutable scalars. Raises NotCopyable."""
    cls = type(value)
    if cls in _SCALARS:
        return value
    # an empty list or dict (a message's ``additional_kwargs``, ``tool_calls``: most of its
    # containers) costs no comprehension: a warm get copies every message of a thread
    if cls is list:
        return [v if type(v) in _SCALARS else fresh(v) for v in value] if value else []
    if cls is dict:
        if not value:
            return {}
        if not _SCALARS.issuperset(map(type, value)):
            raise NotCopyable(f"a dict key of type {type(next(k for k in value if type(k) not in _SCALARS)).__name__}")
        return {k: v if type(v) in _SCALARS else fresh(v) for k, v in value.items()}
    if cls is tuple:
        return tuple([v if type(v) in _SCALARS else fresh(v) for v in value])
    if cls is set or cls is frozenset:
        if not _SCALARS.issuperset(map(type, value)):
            raise NotCopyable("a set of non-scalar items")
        return cls(value)
    model = _MODELS.get(cls)
    if model is None:
        model = _model(cls)
    if model:
        copy = _new(cls)
        state = dict(value.__dict__)  # copied whole in C; only its containers are copied again
        for k, v in state.items():
            if type(v) not in _SCALARS:
                state[k] = fresh(v)
        _set(copy, "__dict__", state)
        extra, private = value.__pydantic_extra__, value.__pydantic_private__
        _set(copy, "__pydantic_extra__", None if extra is None else fresh(extra))
        _set(copy, "__pydantic_fields_set__", set(value.__pydantic_fields_set__))
        _set(copy, "__pydantic_private__", None if private is None else fresh(private))
        return copy
    raise NotCopyable(f"an object of type {cls.__name__}")


def private(value: Any) -> Any | None:
    """The copy of a just-decoded ``value`` for the cache to keep (``fresh``), or None."""
    try:
        return fresh(value)
    except (NotCopyable, RecursionError):
        return None
