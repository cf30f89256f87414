"""The named statements of ``threadline.read`` on Redis: the names, parameters and rows of
``storage/dialect/reads.py``, each a handler (``storage/redis/base.py``).
"""

from __future__ import annotations


class RedisReadsStatements:
    """Mixed into ``RedisDialect`` (before the SQL dialect's classes, whose names it overrides)."""
