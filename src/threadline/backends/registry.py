"""The backends, by URL scheme: the one place that knows which backends exist.

Adding a backend = a dialect (``threadline.storage.dialect``), a driver shell module
``threadline.backends.<name>conn`` (connect + transaction only; ``sqliteconn.py`` is the
model), its savers in ``threadline.backends.<name>`` and one ``BackendEntry`` in ``REGISTRY``. ``open_saver``/``aopen_saver`` and
whatever else opens a URL look the backend up here; nothing else branches on a
backend's name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from threadline.errors import BackendError
from threadline.extras import load

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_USER_INFO = re.compile(r"//[^/@]*@")  # //user:password@
_PASSWORD_PARAM = re.compile(r"(?i)\b((?:ssl)?password)=('(?:[^'\\]|\\.)*'|[^&\s]*)")  # ?password=… or password=… (libpq)


def masked(url: str) -> str:
    """``url`` as messages and pages may show it: its user part (``user:password@``) and any
    ``password`` / ``sslpassword`` parameter (URL query or libpq ``key=value`` form) are ``***``."""
    return _PASSWORD_PARAM.sub(r"\1=***", _USER_INFO.sub("//***@", url))


@dataclass(frozen=True)
class BackendEntry:
    """One backend: the URLs it serves and the parts its shell module provides.

    ``parts`` maps a role to a name in ``module`` (imported on first use, so a backend
    whose driver is not installed costs nothing until a URL names it). Roles:
    ``saver``, ``async_saver``, ``store``, ``async_store`` and ``cache`` (classes opened
    with ``from_conn_string(url)``), ``read_only`` (``open_read_only(url, serde=None)``: a sync
    saver on an existing database, opened read-only and never set up, with its
    ``SchemaState``), ``database`` (``open_database(url)``: the same as a ``readonly.Database``,
    which loads no LangGraph; optional), ``write_refusal`` (``write_refusal(url)``: why this process cannot write
    the existing database, or None; NotADatabaseError when there is none), ``describe``
    (``describe(url)``: how messages name it); a store or a
    cache adds its own roles beside them.
    """

    name: str  # what ``backend_of`` returns
    schemes: tuple[str, ...]  # URL schemes served, lower case
    module: str
    parts: Mapping[str, str]
    example: str  # a URL of this backend, for messages
    scheme_prefixes: tuple[str, ...] = ()  # schemes served by prefix, e.g. "postgresql+" for postgresql+psycopg
    paths: bool = False  # serves a plain file path or ":memory:" (a string with no scheme)
    # how messages say a database holds nothing of threadline's, and what to check
    nothing: str = "holds no threadline tables: check the path or URL (a threadline saver creates them when a program first opens the database)"

    def serves(self, scheme: str) -> bool:
        return scheme in self.schemes or scheme.startswith(self.scheme_prefixes)

    def get(self, role: str) -> Any:
        """The part playing ``role`` (a class or an opener); BackendError when this backend has none,
        MissingExtraError when its driver is not installed (``pip install 'threadline[postgres]'``).

        A part is a name in ``module``, or ``"package.module:name"`` for one elsewhere."""
        if role not in self.parts:
            raise BackendError(f"the {self.name} backend has no {role.replace('_', ' ')}")
        module, _, name = self.parts[role].rpartition(":")
        return getattr(load(module or self.module, f"the {self.name} backend"), name)


REGISTRY: tuple[BackendEntry, ...] = (
    BackendEntry(
        name="sqlite",
        schemes=("sqlite",),
        module="threadline.backends.sqlite",
        parts={
            "saver": "SqliteSaver",
            "async_saver": "AsyncSqliteSaver",
            "read_only": "open_read_only",
            "database": "threadline.backends.sqliteconn:open_database",
            "write_refusal": "threadline.backends.sqliteconn:write_refusal",
            "describe": "threadline.backends.sqliteconn:describe",
            "store": "threadline.store.sqlite:SqliteStore",
            "async_store": "threadline.store.sqlite:AsyncSqliteStore",
            "cache": "threadline.cache:SqliteCache",
        },
        example="sqlite:///path",
        paths=True,
    ),
    BackendEntry(
        name="postgres",
        schemes=("postgresql", "postgres"),
        scheme_prefixes=("postgresql+",),
        module="threadline.backends.postgres",
        parts={
            "saver": "PostgresSaver",
            "async_saver": "AsyncPostgresSaver",
            "read_only": "open_read_only",
            "database": "threadline.backends.postgresconn:open_database",
            "write_refusal": "threadline.backends.postgresconn:write_refusal",
            "describe": "threadline.backends.postgresconn:describe",
            "store": "threadline.store.postgres:PostgresStore",
            "async_store": "threadline.store.postgres:AsyncPostgresStore",
            "cache": "threadline.cache.postgres:PostgresCache",
        },
        example="postgresql://",
    ),
    BackendEntry(
        name="redis",
        schemes=("redis", "rediss", "redis+cluster", "rediss+cluster"),
        module="threadline.backends.redis",
        parts={
            "saver": "RedisSaver",
            "async_saver": "AsyncRedisSaver",
            "read_only": "open_read_only",
            "write_refusal": "write_refusal",
            "describe": "threadline.backends.redisconn:describe",
            "store": "threadline.store.redis:RedisStore",
            "async_store": "threadline.store.redis:AsyncRedisStore",
            "cache": "threadline.cache.redis:RedisCache",
        },
        example="redis://",
        nothing="holds no threadline keys under this key prefix: check the URL and its ?prefix= (a threadline saver writes "
        "them with a thread's first checkpoint)",
    ),
)


def entry_of(url: str) -> BackendEntry:
    """The backend serving ``url`` (a URL, or a plain path for the backend that takes paths).

    Raises BackendError for an empty or non-string URL and for an unknown scheme."""
    if not isinstance(url, str) or not url:
        raise BackendError(f"database URL must be a non-empty string, got {url!r}")
    m = _SCHEME.match(url)
    scheme = m.group(1).lower() if m else None
    for entry in REGISTRY:
        if entry.paths if scheme is None else entry.serves(scheme):
            return entry
    forms = (["a path"] if any(e.paths for e in REGISTRY) else []) + [e.example for e in REGISTRY]
    raise BackendError(f"unknown database URL scheme {scheme!r} in {url!r}; use {', '.join(forms[:-1])} or {forms[-1]}")


def backend_of(url: str) -> str:
    """The name of the backend serving ``url`` (``"sqlite"``, ``"postgres"``); BackendError as ``entry_of``."""
    return entry_of(url).name
