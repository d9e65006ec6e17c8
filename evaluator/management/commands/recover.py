import json

from evaluator.management.database import DatabaseCommand
from evaluator.running.recovery import recover


class Command(DatabaseCommand):
    help = (
        "Close attempts left running by a process of this host that died (infrastructure error worker_lost, "
        "evidence finished as far as it was written) and put cells it had queued back to pending. Never runs "
        "anything; attempts of live processes are left alone. The server does this at start-up."
    )

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options):
        report = recover()
        if options["json"]:
            self.stdout.write(json.dumps({"closed": report.closed, "requeued": report.requeued}))
            return
        self.stdout.write(f"closed as worker_lost: {', '.join(map(str, report.closed)) or 'none'}")
        self.stdout.write(f"back to pending:       {', '.join(map(str, report.requeued)) or 'none'}")
