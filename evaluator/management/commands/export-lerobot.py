import json
import sys
from pathlib import Path

from django.core.management.base import CommandError

from evaluator.exports.lerobot import write_lerobot_dataset
from evaluator.management.database import DatabaseCommand
from evaluator.protocol.errors import ProtocolError
from evaluator.records.models import Campaign


class Command(DatabaseCommand):
    help = (
        "Write a campaign's finished attempts as a LeRobot dataset (format v3.0: parquet data and episode "
        "metadata, the attempts' own mp4 videos, meta/info.json, stats.json, tasks.parquet) into a new folder. "
        "Each episode keeps its protocol identity, outcome and autonomy (evaluator/exports/lerobot.py)."
    )

    def add_arguments(self, parser):
        parser.add_argument("campaign", type=int, help="a campaign's id")
        parser.add_argument("--out", required=True, type=Path, help="a folder that does not exist yet")
        parser.add_argument("--json", action="store_true", help="print the summary as JSON")

    def handle(self, *args, campaign, out, **options):
        try:
            record = Campaign.objects.select_related("benchmark", "protocol", "policy").get(pk=campaign)
        except Campaign.DoesNotExist:
            raise CommandError(f"no campaign {campaign}", returncode=2) from None
        try:
            summary = write_lerobot_dataset(record, out, progress=None if options["json"] else self.progress)
        except ProtocolError as exc:
            raise CommandError(str(exc), returncode=2) from None
        if options["json"]:
            self.stdout.write(json.dumps(summary, indent=1))
            return
        self.stderr.write("")
        self.stdout.write(f"{summary['episodes']} episodes, {summary['frames']} frames -> {summary['out']}")
        for reason in summary["skipped"]:
            self.stdout.write(f"skipped {reason}")

    def progress(self, done: int, total: int) -> None:
        sys.stderr.write(f"\rexported {done}/{total} episodes")
        sys.stderr.flush()
