import json

from django.core.management.base import CommandError

from evaluator.management.database import DatabaseCommand
from evaluator.records.models import Attempt
from evaluator.running.verification import INTACT, UNFINISHED, verify_attempt


class Command(DatabaseCommand):
    help = (
        "Check finished attempts' evidence files against their records: every file present, of its recorded "
        "size and sha256, and manifest.json listing exactly them. Exits 1 when any evidence is altered or missing."
    )

    def add_arguments(self, parser):
        parser.add_argument("attempts", nargs="*", type=int, help="attempt ids")
        parser.add_argument("--all", action="store_true", help="every finished attempt")
        parser.add_argument("--sizes-only", action="store_true", help="skip the hashes (fast)")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, attempts, **options):
        if bool(attempts) == options["all"]:
            raise CommandError("name attempt ids or --all", returncode=2)
        queryset = Attempt.objects.filter(status=Attempt.Status.FINISHED) if options["all"] else Attempt.objects
        if attempts:
            queryset = queryset.filter(pk__in=attempts)
            unknown = sorted(set(attempts) - set(queryset.values_list("pk", flat=True)))
            if unknown:
                raise CommandError(f"no attempt {', '.join(map(str, unknown))}", returncode=2)
        reports = [verify_attempt(a, hashes=not options["sizes_only"]) for a in queryset.order_by("pk")]
        if options["json"]:
            self.stdout.write(json.dumps([r.as_dict() for r in reports], indent=1))
        else:
            for report in reports:
                detail = f": {'; '.join(report.problems)}" if report.problems else ""
                self.stdout.write(f"attempt {report.attempt}: {report.state}{detail}")
        if any(r.state not in (INTACT, UNFINISHED) for r in reports):
            raise CommandError("evidence altered or missing", returncode=1)
