"""SQL per backend: ``Dialect`` (the named statements of ``statements`` plus the hooks a
backend fills in, ``base``), ``SQLITE`` and ``POSTGRES``. Adding a backend starts with a
``Dialect`` subclass here."""

from threadline.storage.dialect.base import Dialect, check_filter, dumps_json
from threadline.storage.dialect.postgres import POSTGRES, PostgresDialect
from threadline.storage.dialect.sqlite import SQLITE, SqliteDialect

__all__ = ["POSTGRES", "SQLITE", "Dialect", "PostgresDialect", "SqliteDialect", "check_filter", "dumps_json"]
