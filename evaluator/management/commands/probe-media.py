from evaluator.execution.media_probe import write_probe
from evaluator.management.database import DatabaseCommand


class Command(DatabaseCommand):
    help = (
        "Record this host's media root for the Celery workers' start-up check: write a probe file of random "
        "contents under RSI_MEDIA_ROOT/.probes/ and its contents in the database. The web process does this at "
        "start-up; run it by hand where the web runs when workers start first."
    )

    def handle(self, *args, **options):
        probe = write_probe()
        self.stdout.write(f"probe {probe.token} written under {probe.media_root} ({probe.host})")
