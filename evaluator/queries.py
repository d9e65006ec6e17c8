"""What the pages and exports ask of the records: a campaign's cells, its aggregates, a comparison."""

from __future__ import annotations

from evaluator.models import (
    Attempt,
    Campaign,
)
from evaluator.protocol.aggregates import CellResult, Comparison, Report, aggregate, compare
from evaluator.protocol.scoring import Outcome


def campaign_cells(campaign: Campaign) -> list[Attempt]:
    """The campaign's original attempts, one per planned cell, in plan order."""
    return list(campaign.attempts.filter(rerun_of__isnull=True).select_related("task").order_by("cell_index"))


def campaign_report(cells: list[Attempt]) -> Report:
    return aggregate(
        CellResult(a.task.name, Outcome(a.outcome) if a.is_finished else None, a.autonomous) for a in cells
    )


def compare_campaigns(a: list[Attempt], b: list[Attempt]) -> Comparison:
    def outcomes(cells):
        return {(c.task.name, c.seed): Outcome(c.outcome) if c.is_finished else None for c in cells}

    human = {(c.task.name, c.seed) for c in [*a, *b] if not c.autonomous}
    return compare(outcomes(a), outcomes(b), human)


def attempt_record(attempt: Attempt) -> dict:
    """The stored record of an attempt, as `manage.py evaluate --json` prints it."""
    return {
        "attempt": attempt.pk,
        "protocol_id": attempt.campaign.protocol.protocol_id,
        "benchmark": attempt.campaign.benchmark.name,
        "task": attempt.task.name,
        "seed": attempt.seed,
        "policy": attempt.campaign.policy.name,
        "status": attempt.status,
        "outcome": attempt.outcome,
        "error_type": attempt.error_type or None,
        "success": attempt.success,
        "success_ever": attempt.success_ever,
        "environment_steps": attempt.environment_steps,
        "action_decisions": attempt.action_decisions,
        "policy_calls": attempt.policy_calls,
        "rejected_calls": attempt.rejected_calls,
        "termination_reason": attempt.termination_reason,
        "first_success_step": attempt.first_success_step,
        "first_success_decision": attempt.first_success_decision,
        "success_at_H": attempt.success_at_h,
        "success_at_2H": attempt.success_at_2h,
        "autonomous": attempt.autonomous,
        "accounting": attempt.accounting,
        "budget": attempt.budget,
        "artifacts": {a.path: a.kind for a in attempt.artifacts.all()},
    }
