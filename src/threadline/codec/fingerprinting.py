"""Item fingerprints: serializing only the new items of a list.

``fingerprints`` (a content fingerprint of a list's items, via ``marshal``) and
the per-class pydantic model checks it relies on (``_plain_model``,
``_model_tag``); ``_FP_HEADER`` is the fingerprint's fixed header length.
"""

from __future__ import annotations

import marshal
from typing import Any

_CORE = frozenset({dict, list, tuple, str, bytes, int, float, bool, type(None)})
# What was found per class (``_plain_model``, ``_model_tag``): process-wide, one entry per
# class; past MAX_CLASSES classes (~200 KB; classes made at run time) both start over.
MAX_CLASSES = 1024
_PLAIN_MODELS: dict[type, bool] = {}


def _plain_model(cls: type) -> bool:
    """A pydantic v2 model whose ``model_dump()`` is a function of its ``__dict__`` and
    ``__pydantic_extra__`` alone: no computed fields, no custom serializers."""
    found = _PLAIN_MODELS.get(cls)
    if found is None:
        try:
            decorators = cls.__pydantic_decorators__  # type: ignore[attr-defined]
            found = (
                hasattr(cls, "model_dump")
                and not cls.model_computed_fields  # type: ignore[attr-defined]
                and not decorators.field_serializers
                and not decorators.model_serializers
            )
        except AttributeError:
            found = False
        if len(_PLAIN_MODELS) >= MAX_CLASSES:
            _PLAIN_MODELS.clear()
        _PLAIN_MODELS[cls] = found
    return found


_MODEL_TAGS: dict[type, tuple | None] = {}


def _model_tag(cls: type) -> tuple | None:
    """``(1, module, name)`` for a plain pydantic model class (one shared tuple per class), else None."""
    try:
        return _MODEL_TAGS[cls]
    except KeyError:
        if len(_MODEL_TAGS) >= MAX_CLASSES:
            _MODEL_TAGS.clear()
        tag = _MODEL_TAGS[cls] = (1, cls.__module__, cls.__name__) if _plain_model(cls) else None
        return tag


def fingerprints(items: Any) -> bytes | None:
    """A content fingerprint of a list's items, or None when an item has none.

    ``marshal`` (format 4) of the items' states as one list: C-speed, exact
    about types (``True``, ``1`` and ``1.0`` differ; ``str`` and dict subclasses
    and other objects are refused), and it keeps dict key order. ``marshal.loads``
    rebuilds exactly what was dumped, so equal fingerprints mean equal content,
    and equal content serializes to equal bytes. An item's encoding depends only
    on the items before it, so "the first n items are unchanged" is a prefix
    comparison of two fingerprints. Unequal fingerprints of equal content (marshal
    also encodes which objects are shared) only cost a whole serialization. A pydantic model's state (no computed fields, no
    custom serializers) is its class's module and name, ``__dict__`` and
    ``__pydantic_extra__`` — what LangGraph's serializer dumps. Never object
    identity: an item mutated in place has a different encoding.
    """
    states: list = []
    append = states.append
    for item in items:
        cls = type(item)
        tag = _MODEL_TAGS.get(cls) if cls not in _CORE else None
        if tag is not None:
            append((tag, item.__dict__, item.__pydantic_extra__))
        elif cls in _CORE:
            append((0, item))
        else:
            tag = _model_tag(cls)
            if tag is None:
                return None
            append((tag, item.__dict__, item.__pydantic_extra__))
    try:
        return marshal.dumps(states, 4)
    except (ValueError, TypeError):  # something marshal cannot hold
        return None


_FP_HEADER = 5  # marshal: the list type byte and a 4-byte count
