"""The Redis side of the storage seam: the engine's named statements as handlers over
Redis keys (``dialect``), their server-side scripts (``scripts``), the key layout and row
packing (``layout``) and the runner that drives an operation on a Redis client (``runner``).
Plain Redis 7 and Redis Cluster; no modules.
"""

from threadline.storage.redis.dialect import RedisDialect

__all__ = ["RedisDialect"]
