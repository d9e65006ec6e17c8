"""Commands that read or write RSI's records first check that the database has its tables.

They say what to run instead of migrating by themselves: migrating a shared PostgreSQL database is
an operator's decision, not a side effect of `evaluate`.
"""

from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor

SETUP_HINT = "run `.venv/bin/python manage.py migrate` and `manage.py load_catalogs` (`make run` does both)"


def require_migrated(using: str = "default") -> None:
    try:
        executor = MigrationExecutor(connections[using])
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as exc:
        raise CommandError(f"cannot read the database: {exc}", returncode=2) from None
    if pending:
        names = ", ".join(f"{migration.app_label}.{migration.name}" for migration, _ in pending[:3])
        more = f" and {len(pending) - 3} more" if len(pending) > 3 else ""
        raise CommandError(
            f"the database is not set up ({len(pending)} migrations not applied: {names}{more}): {SETUP_HINT}",
            returncode=2,
        )


class DatabaseCommand(BaseCommand):
    """A command that needs RSI's tables: refused with a one-line reason when they are missing."""

    def execute(self, *args, **options):
        require_migrated()
        return super().execute(*args, **options)


def check_password_strength(password: str, user) -> None:
    """Django's password validators (settings.AUTH_PASSWORD_VALIDATORS), as the admin runs them."""
    try:
        validate_password(password, user)
    except ValidationError as exc:
        raise CommandError("refused password: " + " ".join(exc.messages), returncode=2) from None
