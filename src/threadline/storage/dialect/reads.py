"""The named statements of ``threadline.read``, in SQL (both dialects; the hooks of ``Dialect``
where the backends differ). Each statement's comment gives its parameters, then (→) the
columns of the rows it returns; ``storage/redis/reads.py`` implements the same names on Redis.
"""

from __future__ import annotations


class ReadsStatements:
    """Mixed into ``Dialect``."""
