from django.core.management.base import CommandError

from evaluator.execution.launching import ensure_builtin_policies
from evaluator.management.database import DatabaseCommand
from evaluator.protocol.errors import ProtocolError
from evaluator.records.catalog_sync import sync_all_catalogs
from evaluator.records.models import RecordImmutable


class Command(DatabaseCommand):
    help = (
        "Validate the task catalogs under environment/catalogs and load them into the database, "
        "and register the built-in policies (noop, stop, fetch-oracle)."
    )

    def handle(self, *args, **options):
        try:
            benchmarks = sync_all_catalogs()
        except ProtocolError as exc:
            raise CommandError(str(exc), returncode=2) from None
        except RecordImmutable as exc:
            raise CommandError(
                f"a catalog changes a task that attempts ran ({exc}): give the changed task a new name", returncode=2
            ) from None
        policies = ensure_builtin_policies()
        for benchmark in benchmarks:
            count = benchmark.tasks.filter(in_catalog=True).count()
            self.stdout.write(
                f"{benchmark.name}: {count} tasks from {benchmark.catalog_file} "
                f"(sha256 {benchmark.catalog_sha256[:12]})"
            )
        self.stdout.write(f"built-in policies: {', '.join(p.name for p in policies)}")
