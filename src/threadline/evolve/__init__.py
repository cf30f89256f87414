"""State that survives a deploy: preflight (``check``) and state migrations (``Migrations``),
applied lazily on read (``with_migrations``) or in batch (``migrate``). See docs/migrations.md."""

from threadline.evolve.lens import with_migrations
from threadline.evolve.registry import MARKER, RECORD, Migrations

__all__ = ["MARKER", "RECORD", "Migrations", "with_migrations"]
