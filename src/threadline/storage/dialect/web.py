"""The named statements of ``threadline.web``, in SQL (both dialects; the hooks of ``Dialect``
where the backends differ). Each statement's comment gives its parameters, then (→) the
columns of the rows it returns; ``storage/redis/web.py`` implements the same names on Redis.
"""

from __future__ import annotations


class WebStatements:
    """Mixed into ``Dialect``."""
