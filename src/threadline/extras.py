"""The optional parts of threadline, as ``pip install 'threadline[…]'`` names them.

The base install is what a SQLite user needs (the savers, the Store and the Cache on SQLite,
the ``threadline`` command's reads and lifecycle commands). A feature of an extra checks it
before using it — ``require`` where it imports the extra's packages itself, ``load`` where it
imports a module of threadline that does — so a missing extra is a ``MissingExtraError`` of one
line naming the install command, never an ImportError traceback.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from threadline.errors import MissingExtraError

# extra → the modules it installs (import names; pyproject.toml's extras list their packages)
EXTRAS: dict[str, tuple[str, ...]] = {
    "postgres": ("psycopg", "psycopg_pool"),
    "redis": ("redis",),
    "ui": ("starlette", "uvicorn", "jinja2", "python_multipart"),
    "export": ("pyarrow",),
    "offload": ("obstore",),
    "otel": ("opentelemetry.metrics",),
    "vector": ("sqlite_vec",),
    "encryption": ("cryptography",),
}


def missing(extra: str) -> list[str]:
    """The modules of ``extra`` that are not installed (none: the extra is installed)."""
    return [m for m in EXTRAS[extra] if not _installed(m)]


def require(extra: str, feature: str) -> None:
    """Return when ``extra`` is installed, else raise MissingExtraError: ``{feature} needs the
    {extra} extra: pip install 'threadline[{extra}]'``. Looks the modules up without importing
    them (microseconds)."""
    if missing(extra):
        raise MissingExtraError(f"{feature} needs the {extra} extra: pip install 'threadline[{extra}]'", extra=extra)


def load(module: str, feature: str) -> ModuleType:
    """``importlib.import_module(module)``, where a package of an extra that is missing raises
    MissingExtraError (as ``require``) instead of ModuleNotFoundError."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        extra = next((e for e, names in EXTRAS.items() if any(_within(exc.name, n) for n in names)), None)
        if extra is None:
            raise
        require(extra, feature)
        raise  # installed after all: the error is another one


def _within(name: str | None, module: str) -> bool:
    """Whether a missing module ``name`` is ``module``, one of its parents or one of its submodules."""
    return bool(name) and (module == name or module.startswith(name + ".") or name.startswith(module + "."))


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a dotted name whose package is missing
        return False
