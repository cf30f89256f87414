"""Names a package exports but loads on first use (PEP 562 ``__getattr__``), so a program
pays only for the backend it uses: a SQLite user never imports psycopg or redis-py; and
``LazyModule``, a module named at module level but loaded only when first used (the
``threadline`` command's implementation when a command runs, a saver's adoption when it adopts)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from threadline.extras import load


def lazy_names(namespace: dict[str, Any], modules: Mapping[str, str]) -> Callable[[str], Any]:
    """A module's ``__getattr__``: each name of ``modules`` (name → module) imported from its
    module on first access and kept in ``namespace`` (the module's ``globals()``), so later
    look-ups do not come here. AttributeError for any other name; MissingExtraError for a name
    whose module needs an extra that is not installed (``threadline.extras``)."""

    def __getattr__(name: str) -> Any:
        if name not in modules:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        value = namespace[name] = getattr(load(modules[name], name), name)
        return value

    return __getattr__


def deferred(namespace: dict[str, Any], names: Mapping[str, str]) -> Callable[[], None]:
    """A loader of module-level names a module's classes use only once an instance exists:
    ``names`` maps each to ``"module"`` or ``"module:attribute"``; the returned function imports
    them into ``namespace`` (the module's ``globals()``) on its first call and does nothing after.
    A constructor calls it, so the module's import stays light while its methods read plain
    globals, with no look-up on every call (as ``LazyModule`` has)."""
    loaded = False

    def load() -> None:
        nonlocal loaded
        if loaded:
            return
        for name, target in names.items():
            module, _, attr = target.partition(":")
            value = importlib.import_module(module)
            namespace[name] = getattr(value, attr) if attr else value
        loaded = True

    return load


def on_first_call(namespace: dict[str, Any], name: str, target: str) -> Callable[..., Any]:
    """A stand-in for a module-level function or class ``name``, ``target`` being
    ``"module:attribute"``: its first call imports the real one, puts it in ``namespace`` (the
    module's ``globals()``) in the stand-in's place and calls it. The module's import loads
    nothing of ``target`` (LangGraph's checkpoint base loads LangChain: most of a CLI listing's
    start-up), and every later call is a plain one."""
    module, _, attr = target.partition(":")

    def stand_in(*args: Any, **kwargs: Any) -> Any:
        real = namespace[name] = getattr(importlib.import_module(module), attr)
        return real(*args, **kwargs)

    return stand_in


class LazyAttribute:
    """A class attribute given as ``"module:attribute"``, imported on first access and then set
    on the class in its place, so every later look-up is a plain one (a saver's ``dialect``:
    the import of the class loads no SQL)."""

    def __init__(self, target: str) -> None:
        self.target = target

    def __set_name__(self, owner: type, name: str) -> None:
        self.owner, self.name = owner, name

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        module, _, attr = self.target.partition(":")
        value = getattr(importlib.import_module(module), attr)
        setattr(self.owner, self.name, value)
        return value


class LazyModule:
    """A stand-in for a module, imported on first attribute access: the ``threadline`` command
    names its implementation at module level but loads it only when a command runs, so
    ``threadline --help`` imports no LangGraph, driver or web framework. Each access looks the
    module up again (about a microsecond): for what is used rarely, not on a put or get."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(load(self._name, self._name), attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"
