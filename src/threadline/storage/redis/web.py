"""The named statements of ``threadline.web`` on Redis: the names, parameters and rows of
``storage/dialect/web.py``, each a handler (``storage/redis/base.py``).
"""

from __future__ import annotations


class RedisWebStatements:
    """Mixed into ``RedisDialect`` (before the SQL dialect's classes, whose names it overrides)."""
