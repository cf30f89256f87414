"""SQL per backend: ``Dialect`` (the named statements of ``statements`` plus the hooks a
backend fills in, ``base``), ``SQLITE`` and ``POSTGRES``. Adding a backend starts with a
``Dialect`` subclass here."""

from threadline.lazy import lazy_names
from threadline.storage.dialect.base import Dialect, check_filter, dumps_json
from threadline.storage.dialect.sqlite import SQLITE, SqliteDialect

# Postgres's SQL loads when a Postgres saver (or tool) first names it, not with a SQLite saver.
__getattr__ = lazy_names(globals(), dict.fromkeys(("POSTGRES", "PostgresDialect"), "threadline.storage.dialect.postgres"))

__all__ = ["POSTGRES", "SQLITE", "Dialect", "PostgresDialect", "SqliteDialect", "check_filter", "dumps_json"]
