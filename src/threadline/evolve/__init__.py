"""State that survives a deploy: preflight (``check``) and state migrations (``Migrations``),
applied lazily on read (``with_migrations``) or in batch (``migrate``). See docs/migrations.md."""

from threadline.evolve.batch import MigrateResult, VerificationError, load_migrations, migrate
from threadline.evolve.check import Problem, Report, check
from threadline.evolve.lens import with_migrations
from threadline.evolve.registry import MARKER, RECORD, Migrations

__all__ = ["MARKER", "RECORD", "MigrateResult", "Migrations", "Problem", "Report", "VerificationError",
           "check", "load_migrations", "migrate", "with_migrations"]
