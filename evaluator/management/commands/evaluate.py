import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError

from evaluator.execution.launching import do_launch_campaign, ensure_builtin_policies
from evaluator.management.database import DatabaseCommand
from evaluator.management.protocol_options import add_protocol_arguments, config_from_options
from evaluator.policies.transports import spec_examples
from evaluator.protocol.catalogs import load_catalog
from evaluator.protocol.errors import ProtocolError
from evaluator.records.catalog_sync import sync_catalog
from evaluator.records.queries import attempt_record
from evaluator.running.evidence import EvidenceWriteFailed
from evaluator.running.interrupts import StopRequest, stop_requested, stopping_on_signals
from evaluator.running.recorder import do_run_attempt


class ProgressBar:
    """One line on the command's stderr: executed controls against the maximum, and calls used."""

    def __init__(self, stream, width: int = 30):
        self.stream, self.width = stream, width

    def __call__(self, counters: dict) -> None:
        done, total = counters["environment_steps"], counters["max_executable_steps"]
        filled = int(self.width * done / total) if total else 0
        self.stream.write(
            f"\r[{'#' * filled}{'.' * (self.width - filled)}] steps {done}/{total}"
            f"  calls {counters['policy_calls'] + 1}/{counters['max_policy_calls']}",
            ending="",
        )
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("")


class Command(DatabaseCommand):
    help = (
        "Run one evaluation cell headless and store it like any other attempt, then print its record. "
        "Takes the protocol options of `manage.py protocol`."
    )

    def add_arguments(self, parser):
        add_protocol_arguments(parser)
        parser.add_argument("--task", required=True, help="a task of the benchmark's catalog")
        parser.add_argument(
            "--policy",
            required=True,
            help=f"a registered policy name (noop, stop, fetch-oracle, ...) or a spec string: {spec_examples()}",
        )
        parser.add_argument("--seed", type=int, required=True, help="reset seed in [0, 2**32)")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")

    def handle(self, *args, **options):
        ensure_builtin_policies()
        try:
            config = config_from_options(options)
            sync_catalog(load_catalog(config.benchmark))
            campaign = do_launch_campaign(
                name=f"evaluate {config.benchmark}/{options['task']} seed {options['seed']}",
                benchmark=config.benchmark,
                task_names=[options["task"]],
                seeds=[options["seed"]],
                policy=options["policy"],
                config=config,
            )
        except ProtocolError as exc:
            raise CommandError(str(exc), returncode=2) from None
        progress = None if options["no_progress"] else ProgressBar(self.stderr)
        attempt = campaign.attempts.get()

        def announce(request: StopRequest) -> None:
            self.stderr.write(
                f"\n{request.reason}: attempt {attempt.pk} stops at its next decision and is closed with its evidence "
                "(again to quit at once: the attempt is then left to `manage.py recover`)"
            )

        with stopping_on_signals(announce):
            try:
                attempt = do_run_attempt(attempt, progress=progress)
            except EvidenceWriteFailed as failure:  # not even the closing files fit: the media root is full
                raise CommandError(
                    f"attempt {attempt.pk} cannot be closed: its evidence {failure}; it stays running until "
                    "`manage.py recover` closes it once the media root has room",
                    returncode=1,
                ) from None
        if progress:
            progress.close()
        record = attempt_record(attempt)
        if options["json"]:
            self.stdout.write(json.dumps(record, indent=2))
        else:
            for key, value in record.items():
                if key != "artifacts":
                    self.stdout.write(f"{key:<24} {value}")
            self.stdout.write(f"{'artifacts':<24} {Path(settings.MEDIA_ROOT) / attempt.evidence_dir}/")
        if (request := stop_requested()) is not None:
            self.stderr.write(
                f"attempt {attempt.pk} was closed as {attempt.error_type or 'it ended'} ({request.reason})"
            )
            raise SystemExit(request.exit_status)
