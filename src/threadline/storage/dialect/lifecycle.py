"""The named statements of ``threadline.lifecycle``, in SQL (both dialects; the hooks of ``Dialect``
where the backends differ). Each statement's comment gives its parameters, then (→) the
columns of the rows it returns; ``storage/redis/lifecycle.py`` implements the same names on Redis.
"""

from __future__ import annotations


class LifecycleStatements:
    """Mixed into ``Dialect``."""
