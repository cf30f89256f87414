"""threadline's load policy on top of LangGraph's serializer.

LangGraph's ``JsonPlusSerializer`` rebuilds objects from msgpack by importing a
module and calling a named constructor. By default it allows any name (with a
warning); in strict mode (``LANGGRAPH_STRICT_MSGPACK=true``) only its safe
types plus what the compiled graph's state schema adds through
``with_allowlist`` — and LangGraph only adds those in strict mode.

threadline decodes in one of three ways, by who reads:

* **graph** (``ThreadlineSerializer()``, every saver's default): strict, yet state
  schemas work in LangGraph's default mode too. A stored constructor is called only
  for LangGraph's safe types (messages, datetimes, ``Send``, …), types passed
  explicitly (``allowed_types=``, or ``with_allowlist``, which LangGraph calls with
  the state schema's types in its strict mode), and — while no allowlist was given
  (LangGraph's default mode, where compile() passes none) — a class that is *already
  imported* in this process (nothing is imported on load) and is a data class: a
  pydantic model, a dataclass, an ``Enum`` with members or a ``NamedTuple``, the kinds
  a state schema is built from. The trade-off: such a class's own code (a
  ``__post_init__``, a validator) runs on stored data, as with LangGraph's default
  serializer; ``ThreadlineSerializer(data_classes=False)`` turns this off.
* **inspection** (``inspecting(serde)``: the CLI, read models, fsck, export): only
  LangGraph's fixed list of safe value types is rebuilt; no class of the application
  and no data class, ever. A state type shows as its stored fields. The read models that
  show values to people (``showing(serde)``: state, diff, latest) go one step further:
  LangGraph's own records (``Interrupt``, ``Send``, ``Command``, … of ``langgraph.types``)
  come back as ``LangGraphRecord`` (the type's name and stored fields), so reading a
  paused thread never imports LangGraph's runtime (``langgraph.types`` loads LangChain's
  runnables and langsmith: most of a second of a command's start-up).
* **transfer** (``transfer_serde()``: ``threadline import`` and adoption of official
  databases): nothing is constructed at all. Every msgpack extension stays opaque
  (``RawExt``) and is written back byte for byte, so the imported value is the
  official one, decoded later by the graph under the graph policy.

Anything else (``os.system``, ``subprocess.Popen``, arbitrary callables, classes
from modules not yet imported, ``enum.Enum`` itself) comes back as its raw stored
data, never called. Pickle is never written nor loaded.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
from collections.abc import Iterable
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    JsonPlusSerializer,
    _create_msgpack_ext_hook,
    _msgpack_default,
    _option,
)
from pydantic import BaseModel

from threadline.codec.record import LangGraphRecord


def _is_data_class(obj: Any) -> bool:
    if not isinstance(obj, type) or obj is BaseModel:
        return False
    if issubclass(obj, enum.Enum):
        return bool(obj.__members__)  # calling a member-less Enum with two arguments creates a new class
    if dataclasses.is_dataclass(obj) or issubclass(obj, BaseModel):
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
        # kept so a preflight can ask what this serializer would construct (``codec.probe.loads``)
        self.load_policy = _LoadPolicy(self._allowed_msgpack_modules or (), data_classes)
        self._unpack_ext_hook = _create_msgpack_ext_hook(self.load_policy)

    def with_msgpack_allowlist(self, extra_allowlist: Iterable[tuple[str, ...] | type]) -> JsonPlusSerializer:
        clone = super().with_msgpack_allowlist(extra_allowlist)
        if clone is not self:
            clone._use_policy(False)
        return clone


def default_serde() -> ThreadlineSerializer:
    """The serializer every threadline saver uses unless given another."""
    return ThreadlineSerializer()


_INSPECT = ThreadlineSerializer(data_classes=False)


def inspecting(serde: SerializerProtocol) -> SerializerProtocol:
    """The serializer inspection paths decode with (CLI, read models, fsck): for a saver on
    LangGraph's serializer (threadline's or the official one), LangGraph's safe types only;
    any other serializer (one the application wrote) is used as given."""
    return _INSPECT if isinstance(serde, JsonPlusSerializer) else serde


_SEND_FIELDS = ("node", "arg", "timeout")


class _ShowingSerializer(ThreadlineSerializer):
    """``showing()``: inspection's policy, with ``langgraph.types`` records as ``LangGraphRecord``."""

    def __init__(self) -> None:
        super().__init__(data_classes=False)

    def _use_policy(self, data_classes: bool) -> None:
        inner = _create_msgpack_ext_hook(_LoadPolicy(self._allowed_msgpack_modules or (), False))

        def hook(code: int, data: bytes) -> Any:
            if code not in (EXT_CONSTRUCTOR_KW_ARGS, EXT_CONSTRUCTOR_POS_ARGS):
                return inner(code, data)
            try:
                module, name, args = ormsgpack.unpackb(data, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
            except Exception:  # not a (module, name, args) triple: as LangGraph's own hook reads it
                return inner(code, data)
            if module != "langgraph.types" or (module, name) not in _INSPECT_SAFE:
                return inner(code, data)
            if code == EXT_CONSTRUCTOR_KW_ARGS and isinstance(args, dict):
                return LangGraphRecord(name, {str(k): v for k, v in args.items()})
            if code == EXT_CONSTRUCTOR_POS_ARGS and name == "Send" and isinstance(args, (list, tuple)) and len(args) in (2, 3):
                return LangGraphRecord(name, dict(zip(_SEND_FIELDS, args)))
            return inner(code, data)

        self._unpack_ext_hook = hook


def _safe_types() -> frozenset[tuple[str, str]]:
    from langgraph.checkpoint.serde import _msgpack

    return frozenset(_msgpack.SAFE_MSGPACK_TYPES)


_INSPECT_SAFE = _safe_types()
_SHOW = _ShowingSerializer()


def showing(serde: SerializerProtocol) -> SerializerProtocol:
    """The serializer the read models that show values decode with (state, diff, latest):
    ``inspecting``'s, with LangGraph's own records (``langgraph.types``) decoded as
    ``LangGraphRecord``; any other serializer (one the application wrote) is used as given."""
    return _SHOW if isinstance(serde, JsonPlusSerializer) else serde


class RawExt:
    """A msgpack extension kept as stored (``code``, ``data``): never constructed, written back as is."""

    __slots__ = ("code", "data")

    def __init__(self, code: int, data: bytes) -> None:
        self.code, self.data = code, bytes(data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RawExt) and (self.code, self.data) == (other.code, other.data)

    def __hash__(self) -> int:
        return hash((self.code, self.data))

    def __repr__(self) -> str:
        return f"RawExt({self.code}, {len(self.data)} bytes)"


def _transfer_default(obj: Any) -> Any:
    return ormsgpack.Ext(obj.code, obj.data) if isinstance(obj, RawExt) else _msgpack_default(obj)


class _TransferSerializer(ThreadlineSerializer):
    """``transfer_serde``: msgpack extensions decode to ``RawExt`` and encode back to the same bytes."""

    def __init__(self) -> None:
        super().__init__(data_classes=False)
        self._unpack_ext_hook = RawExt

    def _use_policy(self, data_classes: bool) -> None:
        self._unpack_ext_hook = RawExt

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if obj is None or isinstance(obj, (bytes, bytearray)):
            return super().dumps_typed(obj)
        return "msgpack", ormsgpack.packb(obj, default=_transfer_default, option=_option)


def transfer_serde() -> ThreadlineSerializer:
    """The serializer import and adoption copy values with: constructs nothing (see the module docstring)."""
    return _TransferSerializer()
