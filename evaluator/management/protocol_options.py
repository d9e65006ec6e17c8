"""The protocol options shared by `manage.py protocol` and `manage.py evaluate`."""

from evaluator.protocol.identity import BUDGET_MODES, INTERACTION_MODES, ProtocolConfig, configure
from evaluator.protocol.registry import PROTOCOLS


def add_protocol_arguments(parser) -> None:
    parser.add_argument("benchmark", help=f"one of: {', '.join(sorted(PROTOCOLS))}")
    parser.add_argument("--sensors", help="sensor track, e.g. rgb, rgb-qpos, privileged-state (default: the first)")
    parser.add_argument("--interaction-mode", help=" or ".join(INTERACTION_MODES))
    parser.add_argument("--action-rejection-feedback", action="store_true", help="select the feedback track")
    parser.add_argument("--budget-mode", help=" or ".join(BUDGET_MODES))
    parser.add_argument("--horizon-multiplier", type=int, help="1 (native) or 2 (extended horizon)")
    parser.add_argument("--max-policy-calls", type=int, help="C, or D in decision mode")
    parser.add_argument("--replan-interval", type=int, help="K: the longest action prefix per decision")
    parser.add_argument("--runner-step-cap", type=int, help="the runner's own step cap")
    parser.add_argument("--task-scope", help="SIMPLE: default or released-12")
    parser.add_argument("--json", action="store_true", help="print JSON")


def config_from_options(options: dict, **full_matrix) -> ProtocolConfig:
    """The configuration the options name; a full campaign adds its matrix (full_protocol, matrix_sha)."""
    return configure(
        options["benchmark"],
        **full_matrix,
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
