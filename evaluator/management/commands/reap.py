import json

from evaluator.management.database import DatabaseCommand
from evaluator.running.heartbeats import heartbeat_limit
from evaluator.running.recovery import reap_lost_attempts


class Command(DatabaseCommand):
    help = (
        "Close running attempts, on any host, whose heartbeat is older than RSI_HEARTBEAT_LIMIT_S (default 60 s) "
        "as the infrastructure error worker_lost, with the evidence written so far kept and the manifest "
        "completed. Never runs anything again. Celery beat runs the same every RSI_REAP_INTERVAL_S (rsi.reap)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--limit", type=float, help="seconds without a heartbeat (default RSI_HEARTBEAT_LIMIT_S)")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options):
        limit = options["limit"] if options["limit"] is not None else heartbeat_limit()
        closed = reap_lost_attempts(limit)
        if options["json"]:
            self.stdout.write(json.dumps({"closed": closed, "limit_s": limit}))
            return
        self.stdout.write(
            f"closed as worker_lost (no heartbeat for {limit:g} s): {', '.join(map(str, closed)) or 'none'}"
        )
