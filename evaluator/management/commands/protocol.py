import json

from django.core.management.base import BaseCommand, CommandError

from evaluator.management.protocol_options import add_protocol_arguments, config_from_options
from evaluator.protocol.budgets import resolve_budget
from evaluator.protocol.catalogs import load_catalog
from evaluator.protocol.errors import ProtocolError


class Command(BaseCommand):
    help = (
        "Print the resolved protocol configuration of a benchmark (identity and budgets). "
        "Exits 2 with a one-line reason when the options are not a valid combination."
    )

    def add_arguments(self, parser):
        add_protocol_arguments(parser)
        parser.add_argument("--task", help="a task of the benchmark's catalog (fills in native_horizon)")

    def handle(self, *args, **options):
        try:
            resolved = resolve(options)
        except ProtocolError as exc:
            raise CommandError(str(exc), returncode=2) from None
        if options["json"]:
            self.stdout.write(json.dumps(resolved, indent=2))
        else:
            width = max(len(k) for k in resolved)
            for key, value in resolved.items():
                self.stdout.write(f"{key:<{width}}  {value}")


def resolve(options: dict) -> dict:
    config = config_from_options(options)
    resolved = config.as_dict()
    resolved["task"] = options["task"]
    if options["task"] is not None:
        catalog = load_catalog(config.benchmark)
        task = catalog.task_in_scope(config, options["task"])
        resolved.update(resolve_budget(config, task.native_horizon).as_dict())
        resolved["catalog_sha256"] = catalog.sha256
    else:
        # Without a task only decision mode fixes the evaluation horizon (D x K).
        resolved.update(
            native_horizon=None,
            evaluation_horizon=config.evaluation_horizon(None),
            max_executable_steps=config.max_executable_steps(None),
        )
    return resolved
