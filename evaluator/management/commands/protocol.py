import json

from django.core.management.base import BaseCommand, CommandError

from evaluator.protocol.budgets import resolve_budget
from evaluator.protocol.catalogs import load_catalog
from evaluator.protocol.errors import ProtocolError
from evaluator.protocol.identity import BUDGET_MODES, FAMILIES, INTERACTION_MODES, configure


class Command(BaseCommand):
    help = (
        "Print the resolved protocol configuration of a benchmark (identity and budgets). "
        "Exits 2 with a one-line reason when the options are not a valid combination."
    )

    def add_arguments(self, parser):
        parser.add_argument("benchmark", help=f"one of: {', '.join(sorted(FAMILIES))}")
        parser.add_argument("--task", help="a task of the benchmark's catalog (fills in native_horizon)")
        parser.add_argument("--sensors", help="sensor track, e.g. rgb or rgb-qpos (default: the benchmark's first)")
        parser.add_argument("--interaction-mode", help=" or ".join(INTERACTION_MODES))
        parser.add_argument("--action-rejection-feedback", action="store_true", help="select the feedback track")
        parser.add_argument("--budget-mode", help=" or ".join(BUDGET_MODES))
        parser.add_argument("--horizon-multiplier", type=int, help="1 (native) or 2 (extended horizon)")
        parser.add_argument("--max-policy-calls", type=int, help="C, or D in decision mode")
        parser.add_argument("--replan-interval", type=int, help="K: the longest action prefix per decision")
        parser.add_argument("--runner-step-cap", type=int, help="the runner's own step cap")
        parser.add_argument("--task-scope", help="SIMPLE: default or released-12")
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")

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
    config = configure(
        options["benchmark"],
        sensors=options["sensors"],
        interaction_mode=options["interaction_mode"],
        action_rejection_feedback=options["action_rejection_feedback"],
        budget_mode=options["budget_mode"],
        horizon_multiplier=options["horizon_multiplier"],
        max_policy_calls=options["max_policy_calls"],
        replan_interval=options["replan_interval"],
        runner_step_cap=options["runner_step_cap"],
        task_scope=options["task_scope"],
    )
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
