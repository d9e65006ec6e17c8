import json

from django.core.management.base import CommandError

from evaluator.exports.replay import check_summary, do_create_campaign_check, do_create_replay, run_replay
from evaluator.management.database import DatabaseCommand
from evaluator.protocol.errors import ProtocolError
from evaluator.records.models import Attempt, Campaign, Replay

EXIT = {Replay.Verdict.IDENTICAL: 0, Replay.Verdict.DIVERGENT: 1}


class Command(DatabaseCommand):
    help = (
        "Replay a finished attempt: a fresh native worker of the same benchmark, catalog entry, construction and "
        "seed executes its executed actions (the human's too) without the policy, and each observation is compared "
        "with the attempt's evidence. Stored as a replay record linked to the attempt, never as an attempt. "
        "With --campaign C --cells N: N finished cells of campaign C picked at random (the pick recorded), each "
        "replayed, and the share reproduced. Exits 0 when identical, 1 when divergent, 2 when it could not compare."
    )

    def add_arguments(self, parser):
        parser.add_argument("attempt", type=int, nargs="?", help="a finished attempt's id")
        parser.add_argument("--campaign", type=int, help="check a campaign instead: replay --cells of its cells")
        parser.add_argument("--cells", type=int, default=4, help="how many cells --campaign picks (default 4)")
        parser.add_argument("--pick-seed", type=int, help="the pick's random seed (default: a fresh one, recorded)")
        parser.add_argument("--json", action="store_true", help="print the replay record as JSON")

    def handle(self, *args, attempt, **options):
        if (attempt is None) == (options["campaign"] is None):
            raise CommandError("name an attempt, or --campaign C", returncode=2)
        if options["campaign"] is not None:
            return self.check_campaign(options)
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

    def check_campaign(self, options) -> None:
        try:
            campaign = Campaign.objects.select_related("benchmark").get(pk=options["campaign"])
        except Campaign.DoesNotExist:
            raise CommandError(f"no campaign {options['campaign']}", returncode=2) from None
        try:
            check = do_create_campaign_check(None, campaign, options["cells"], options["pick_seed"])
        except ProtocolError as exc:
            raise CommandError(str(exc), returncode=2) from None
        for number, replay in enumerate(check.replays.order_by("pk"), start=1):
            run_replay(replay)
            if not options["json"]:
                self.stderr.write(f"[{number}/{check.cells}] attempt {replay.attempt_id}: {replay.verdict}")
        summary = check_summary(check)
        if options["json"]:
            self.stdout.write(json.dumps(summary, indent=1))
        else:
            rate = "-" if summary["reproduced"] is None else f"{summary['reproduced']:.0%}"
            self.stdout.write(
                f"check {check.pk} of campaign {campaign.pk}: {summary['identical']}/{summary['compared']} identical "
                f"({rate}), {summary['divergent']} divergent, {summary['could_not_compare']} could not compare; "
                f"picked attempts {summary['picked']} with seed {summary['pick_seed']}"
            )
        if summary["divergent"]:
            raise CommandError("some replayed cells diverged", returncode=1)
        if summary["could_not_compare"]:
            raise CommandError("some cells could not be compared", returncode=2)


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
