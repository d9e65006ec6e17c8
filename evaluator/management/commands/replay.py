import json

from django.core.management.base import CommandError

from evaluator.management.database import DatabaseCommand
from evaluator.models import Attempt, Replay
from evaluator.protocol.errors import ProtocolError
from evaluator.replay import do_create_replay, run_replay

EXIT = {Replay.Verdict.IDENTICAL: 0, Replay.Verdict.DIVERGENT: 1}


class Command(DatabaseCommand):
    help = (
        "Replay a finished attempt: a fresh native worker of the same benchmark, catalog entry, construction and "
        "seed executes its executed actions (the human's too) without the policy, and each observation is compared "
        "with the attempt's evidence. Stored as a replay record linked to the attempt, never as an attempt. "
        "Exits 0 when identical, 1 when divergent, 2 when it could not compare."
    )

    def add_arguments(self, parser):
        parser.add_argument("attempt", type=int, help="a finished attempt's id")
        parser.add_argument("--json", action="store_true", help="print the replay record as JSON")

    def handle(self, *args, attempt, **options):
        try:
            record = Attempt.objects.select_related("campaign__benchmark", "task").get(pk=attempt)
        except Attempt.DoesNotExist:
            raise CommandError(f"no attempt {attempt}", returncode=2) from None
        try:
            replay = run_replay(do_create_replay(None, record))
        except ProtocolError as exc:
            raise CommandError(str(exc), returncode=2) from None
        summary = replay_summary(replay)
        if options["json"]:
            self.stdout.write(json.dumps(summary, indent=1))
        else:
            for key, value in summary.items():
                if value not in (None, "", {}):
                    self.stdout.write(f"{key:<16} {value}")
        if replay.verdict not in EXIT:
            raise CommandError(f"replay {replay.pk}: {replay.detail}", returncode=2)
        if EXIT[replay.verdict]:
            raise CommandError(f"replay {replay.pk}: {replay.detail}", returncode=1)


def replay_summary(replay: Replay) -> dict:
    return {
        "replay": replay.pk,
        "attempt": replay.attempt_id,
        "verdict": replay.verdict,
        "steps_compared": replay.steps_compared,
        "human_steps": replay.human_steps,
        "divergence": replay.divergence,
        "detail": replay.detail,
        "evaluator_revision": replay.evaluator_revision,
        "started_at": replay.started_at.isoformat(),
        "finished_at": replay.finished_at.isoformat() if replay.finished_at else None,
    }
