"""The named statements of ``threadline.transfer``, in SQL (both dialects; the hooks of ``Dialect``
where the backends differ). Each statement's comment gives its parameters, then (→) the
columns of the rows it returns; ``storage/redis/transfer.py`` implements the same names on Redis.
"""

from __future__ import annotations


class TransferStatements:
    """Mixed into ``Dialect``."""
