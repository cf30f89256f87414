"""Defaults the library and the ``threadline`` command share, in a module that imports nothing:
the command's help shows them without loading the library."""

MONTHS_AHEAD = 3  # monthly partitions created ahead of now (``lifecycle.partition``)
MAX_ROUND_TRIP_MS = 1000.0  # a health probe's round trip slower than this is degraded (``lifecycle.health``)
