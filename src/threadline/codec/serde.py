"""threadline's load policy on top of LangGraph's serializer.

LangGraph's ``JsonPlusSerializer`` rebuilds objects from msgpack by importing a
module and calling a named constructor. By default it allows any name (with a
warning); in strict mode (``LANGGRAPH_STRICT_MSGPACK=true``) only its safe
types plus what the compiled graph's state schema adds through
``with_allowlist`` — and LangGraph only adds those in strict mode.

threadline's policy (``ThreadlineSerializer``) is strict, yet state schemas work
in LangGraph's default mode too. A stored constructor is called only for:

* LangGraph's safe types (messages, datetimes, ``Send``, …) and any type passed
  explicitly (``allowed_types=``, or ``with_allowlist``, which LangGraph calls
  with the state schema's types in its strict mode);
* while no allowlist was given (LangGraph's default mode, where compile() passes
  none): a class that is *already imported* in this process (its module is in
  ``sys.modules``; nothing is imported on load) and is a data class — a pydantic
  model, a dataclass, an ``Enum`` or a ``NamedTuple``, the kinds a state schema
  is built from. ``ThreadlineSerializer(data_classes=False)`` turns this off.

Anything else (``os.system``, ``subprocess.Popen``, arbitrary callables, classes
from modules not yet imported) comes back as its raw stored data, never called.
Pickle is never written nor loaded.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
from collections.abc import Iterable
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer, _create_msgpack_ext_hook
from pydantic import BaseModel


def _is_data_class(obj: Any) -> bool:
    if not isinstance(obj, type):
        return False
    if dataclasses.is_dataclass(obj) or issubclass(obj, (BaseModel, enum.Enum)):
        return True
    return issubclass(obj, tuple) and hasattr(obj, "_fields")  # NamedTuple


class _LoadPolicy:
    """Set-like allowlist for LangGraph's msgpack ext hook (it only asks ``key in allowlist``)."""

    def __init__(self, explicit: Iterable[tuple[str, ...]], data_classes: bool) -> None:
        self.explicit = frozenset(explicit)
        self.data_classes = data_classes

    def __contains__(self, key: object) -> bool:
        if key in self.explicit:
            return True
        if not self.data_classes or not (isinstance(key, tuple) and len(key) == 2 and all(isinstance(k, str) for k in key)):
            return False
        module = sys.modules.get(key[0])
        return module is not None and _is_data_class(getattr(module, key[1], None))


class ThreadlineSerializer(JsonPlusSerializer):
    """``JsonPlusSerializer`` with threadline's load policy (see the module docstring).

    ``allowed_types``: classes or ``(module, name)`` pairs whose stored instances
    may be constructed. Giving any (here or through ``with_allowlist``) turns off
    the imported-data-class rule, as does ``data_classes=False``.
    """

    def __init__(self, allowed_types: Iterable[tuple[str, ...] | type] = (), *, data_classes: bool = True) -> None:
        allowed = tuple(allowed_types)
        super().__init__(pickle_fallback=False, allowed_msgpack_modules=allowed or None)
        self._use_policy(data_classes and not allowed)

    def _use_policy(self, data_classes: bool) -> None:
        self._unpack_ext_hook = _create_msgpack_ext_hook(_LoadPolicy(self._allowed_msgpack_modules or (), data_classes))

    def with_msgpack_allowlist(self, extra_allowlist: Iterable[tuple[str, ...] | type]) -> JsonPlusSerializer:
        clone = super().with_msgpack_allowlist(extra_allowlist)
        if clone is not self:
            clone._use_policy(False)
        return clone


def default_serde() -> ThreadlineSerializer:
    """The serializer every threadline saver uses unless given another."""
    return ThreadlineSerializer()
