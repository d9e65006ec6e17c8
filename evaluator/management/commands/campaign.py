import json

from django.conf import settings
from django.core.management.base import CommandError

from evaluator.execution.launching import (
    do_launch_campaign,
    do_launch_full_campaign,
    do_start_attempts,
    ensure_builtin_policies,
    full_plan,
)
from evaluator.management.commands.evaluate import ProgressBar
from evaluator.management.database import DatabaseCommand
from evaluator.management.protocol_options import add_protocol_arguments, config_from_options
from evaluator.protocol.catalogs import load_catalog
from evaluator.protocol.errors import ProtocolError
from evaluator.protocol.full_matrix import load_matrix
from evaluator.protocol.identity import FULL_PROTOCOLS
from evaluator.protocol.paired import DEFAULT_LEVEL, DEFAULT_MARGIN, check_level_and_margin
from evaluator.protocol.seeds import consecutive_seeds, parse_seed_list
from evaluator.records.catalog_sync import sync_catalog
from evaluator.records.models import Attempt, Campaign
from evaluator.records.queries import campaign_cells, campaign_report
from evaluator.records.runners import queue_name
from evaluator.records.sequential import cells_not_run, sequential_state_of, start_order
from evaluator.running.recorder import do_run_attempt


class Command(DatabaseCommand):
    help = (
        "Create a campaign from the shell: its tasks x frozen reset seeds become pending cells, as the launch "
        "form makes them. With --run, run every cell here, one after the other, and print the aggregates. "
        "Takes the protocol options of `manage.py protocol`. With --against, a sequential campaign on a finished "
        "baseline's very cells (the same plan), stopped once its paired test decides."
    )

    def add_arguments(self, parser):
        add_protocol_arguments(parser)
        parser.add_argument("--tasks", nargs="+", help="task names of the catalog, or: all (not with --full)")
        parser.add_argument(
            "--full",
            choices=FULL_PROTOCOLS,
            help="simpler_env: the native full matrix, cell by cell (960 or 1,992 cells), instead of --tasks",
        )
        parser.add_argument("--families", nargs="+", default=[], help="with --full: only these families")
        parser.add_argument(
            "--preview",
            action="store_true",
            help="with --full: print the cells per family and the assets this host lacks",
        )
        parser.add_argument("--policy", required=True, help="a registered policy name or a spec string")
        seeds = parser.add_mutually_exclusive_group()
        seeds.add_argument("--seeds", help='the reset seeds, e.g. "0,7,42"')
        seeds.add_argument("--repeats", type=int, default=1, help="N consecutive seeds from --base-seed (default 1)")
        parser.add_argument("--base-seed", type=int, default=0, help="the first seed of --repeats (default 0)")
        parser.add_argument("--name", help="the campaign's name (default: made from the plan)")
        parser.add_argument(
            "--against",
            type=int,
            metavar="CAMPAIGN",
            help="a finished baseline campaign of the same plan: run its cells in a random order and stop starting "
            "them once the paired test decides (docs/statistics.md)",
        )
        parser.add_argument("--level", type=float, help=f"with --against: the test's level (default {DEFAULT_LEVEL})")
        parser.add_argument(
            "--margin", type=float, help=f"with --against: the margin of no difference (default {DEFAULT_MARGIN})"
        )
        run = parser.add_mutually_exclusive_group()
        run.add_argument("--run", action="store_true", help="run every pending cell in this process")
        run.add_argument(
            "--start",
            action="store_true",
            help="queue every cell on the Celery workers (RSI_EXECUTOR=celery), as Start on the campaign page does",
        )
        parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")

    def handle(self, *args, **options):
        if options["start"] and settings.RSI_EXECUTOR != "celery":
            raise CommandError(
                "--start queues cells for Celery workers (RSI_EXECUTOR=celery); the embedded executor lives in the "
                "web server: use --run here, or Start on the campaign page",
                returncode=2,
            )
        if bool(options["full"]) == bool(options["tasks"]):
            raise CommandError("give either --tasks or --full", returncode=2)
        if options["preview"] and not options["full"]:
            raise CommandError("--preview shows a full campaign's plan: give --full", returncode=2)
        ensure_builtin_policies()
        try:
            baseline, level, margin = _sequential(options)
            if options["full"]:
                full = load_matrix(options["full"])
                config = config_from_options(options, full_protocol=full.protocol, matrix_sha=full.sha256[:12])
                sync_catalog(load_catalog(config.benchmark))
                if options["preview"]:
                    self._preview(full, options["families"], config, options["json"])
                    return
                campaign = do_launch_full_campaign(
                    name=options["name"] or f"{full.title} (shell)",
                    protocol=full.protocol,
                    policy=options["policy"],
                    config=config,
                    families=options["families"],
                )
                tasks, seeds = campaign.task_names, campaign.seeds
            else:
                config = config_from_options(options)
                catalog = load_catalog(config.benchmark)
                sync_catalog(catalog)
                tasks = list(catalog.tasks) if options["tasks"] == ["all"] else options["tasks"]
                if options["seeds"]:
                    seeds = parse_seed_list(options["seeds"])
                else:
                    seeds = consecutive_seeds(options["base_seed"], options["repeats"])
                campaign = do_launch_campaign(
                    name=options["name"] or f"{config.benchmark}: {len(tasks)} tasks x {len(seeds)} seeds (shell)",
                    benchmark=config.benchmark,
                    task_names=tasks,
                    seeds=seeds,
                    policy=options["policy"],
                    config=config,
                    against=baseline,
                    level=level,
                    margin=margin,
                )
        except ProtocolError as exc:
            raise CommandError(str(exc), returncode=2) from None
        cells = campaign_cells(campaign)
        shape = "full matrix" if options["full"] else f"{len(tasks)} tasks x {len(seeds)} seeds"
        self.stderr.write(f"campaign {campaign.pk}: {len(cells)} cells ({shape}), protocol {config.protocol_id}")
        if options["start"]:
            queued = do_start_attempts(None, cells)
            self.stderr.write(f"queued {len(queued)} cells on {queue_name(config.benchmark)}")
        if options["run"]:
            # A sequential campaign's cells in its predeclared random order; once it decides, the rest are not run.
            by_id = {cell.pk: cell for cell in cells}
            for number, cell in enumerate((by_id[pk] for pk in start_order(by_id)), 1):
                self.stderr.write(f"cell {number}/{len(cells)}: {cell.task.name} seed {cell.seed}")
                progress = None if options["no_progress"] else ProgressBar(self.stderr)
                finished = do_run_attempt(cell, progress=progress)
                if progress:
                    progress.close()
                if finished.status == Attempt.Status.NOT_RUN:
                    self.stderr.write("  not run: the sequential test had decided")
                    continue
                self.stderr.write(f"  {finished.outcome}{f' ({finished.error_type})' if finished.error_type else ''}")
        cells = list(Attempt.objects.filter(pk__in=[c.pk for c in cells]).select_related("task").order_by("cell_index"))
        summary = {
            "campaign": campaign.pk,
            "protocol_id": config.protocol_id,
            "tasks": tasks,
            "seeds": list(seeds),
            "cells": [{"attempt": c.pk, "task": c.task.name, "seed": c.seed, "status": c.status} for c in cells],
            "aggregates": campaign_report(cells).as_dict(),
        }
        state = sequential_state_of(campaign)
        if state is not None:
            summary["sequential"] = {
                **state.as_dict(),
                "baseline": baseline.pk,
                "cells_not_run": cells_not_run(campaign),
            }
        if options["json"]:
            self.stdout.write(json.dumps(summary, indent=2))
            return
        overall = summary["aggregates"]["overall"]
        for key in ("campaign", "protocol_id"):
            self.stdout.write(f"{key:<24} {summary[key]}")
        self.stdout.write(f"{'cells':<24} {len(cells)} ({sum(c.is_finished for c in cells)} finished)")
        rate = overall["success_rate"]
        interval = (
            f" [{rate['wilson95_low']:.3f}, {rate['wilson95_high']:.3f}]" if rate["wilson95_low"] is not None else ""
        )
        self.stdout.write(f"{'success_rate':<24} {rate['numerator']}/{rate['denominator']}{interval}")
        if state is not None:
            verdict = state.verdict.label
            when = (
                f"after {state.decided_at} pairs" if state.decided else f"not decided after {state.counts.pairs} pairs"
            )
            not_run = summary["sequential"]["cells_not_run"]
            self.stdout.write(f"{'sequential test':<24} {verdict} ({when}); {not_run} cell(s) not run")

    def _preview(self, matrix, families: list[str], config, as_json: bool) -> None:
        """A full campaign's plan without storing it: cells per family, and the assets this host lacks."""
        shared = full_plan(matrix.subset(families) if families else matrix.cells)
        plan = {
            "protocol_id": config.protocol_id,
            "matrix": matrix.protocol,
            "matrix_sha256": matrix.sha256,
            **shared,
            "asset_check": shared["asset_check"] or "ok",
        }
        per_family = plan["families"]
        if as_json:
            self.stdout.write(json.dumps(plan, indent=2))
            return
        self.stdout.write(f"{matrix.title}: {plan['cells']} cells, {plan['scored']} scored ({plan['protocol_id']})")
        for family, entry in per_family.items():
            self.stdout.write(f"  {family:<30} {entry['cells']:>5} cells ({entry['scored']} scored)")
        if plan["asset_check"] != "ok":
            self.stdout.write(f"assets: cannot be checked on this host: {plan['asset_check']}")
        for family, paths in plan["missing_assets"].items():
            self.stdout.write(f"  {family} lacks {', '.join(paths)}")


def _sequential(options: dict) -> tuple[Campaign | None, float, float]:
    """The baseline of a sequential campaign with its level and margin (defaults where not given), or why not:
    the same refusals as the launch form's."""
    level = DEFAULT_LEVEL if options["level"] is None else options["level"]
    margin = DEFAULT_MARGIN if options["margin"] is None else options["margin"]
    if options["against"] is None:
        if options["level"] is not None or options["margin"] is not None:
            raise CommandError(
                "--level and --margin set a sequential campaign's test: give --against too", returncode=2
            )
        return None, level, margin
    if options["full"]:
        raise CommandError("a sequential campaign pairs task-and-seed cells: it cannot run --full", returncode=2)
    baseline = Campaign.objects.filter(pk=options["against"]).first()
    if baseline is None:
        raise CommandError(f"no campaign {options['against']} to run against", returncode=2)
    check_level_and_margin(level, margin)
    return baseline, level, margin
