"""The named statements of ``threadline.lifecycle`` on Redis: the names, parameters and rows of
``storage/dialect/lifecycle.py``, each a handler (``storage/redis/base.py``).
"""

from __future__ import annotations


class RedisLifecycleStatements:
    """Mixed into ``RedisDialect`` (before the SQL dialect's classes, whose names it overrides)."""
