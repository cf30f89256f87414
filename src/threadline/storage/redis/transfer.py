"""The named statements of ``threadline.transfer`` on Redis: the names, parameters and rows of
``storage/dialect/transfer.py``, each a handler (``storage/redis/base.py``).
"""

from __future__ import annotations


class RedisTransferStatements:
    """Mixed into ``RedisDialect`` (before the SQL dialect's classes, whose names it overrides)."""
