"""What the pages and exports ask of the records: a campaign's cells, its aggregates, a comparison."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from evaluator.models import (
    Attempt,
    Campaign,
)
from evaluator.protocol.aggregates import CellResult, Comparison, Report, aggregate, compare
from evaluator.protocol.full_matrix import load_matrix
from evaluator.protocol.full_report import FullCellResult, FullReport, HeatMap, full_report, heat_maps, variant_of
from evaluator.protocol.scoring import Outcome


def campaign_cells(campaign: Campaign, statuses: tuple[str, ...] = ()) -> list[Attempt]:
    """The campaign's original attempts, one per planned cell, in plan order (only those in `statuses`)."""
    # Without the large JSON of each cell (provenance, a full matrix's cell): pages do not show them.
    cells = campaign.attempts.filter(rerun_of__isnull=True).select_related("task").defer("provenance", "full_cell")
    if statuses:
        cells = cells.filter(status__in=statuses)
    return list(cells.order_by("cell_index"))


def campaign_report(cells: list[Attempt]) -> Report:
    return aggregate(
        CellResult(a.task.name, Outcome(a.outcome) if a.is_finished else None, a.autonomous) for a in cells
    )


@dataclass(frozen=True)
class FullCampaignView:
    """What a full campaign's page shows, from one query over its cells (up to 1,992)."""

    report: FullReport
    maps: dict[str, list[HeatMap]]  # per family
    task_report: Report
    total: int
    finished: int
    pending: int
    running: int
    eta_s: float | None  # at the pace so far: mean duration of finished cells, over the cells running now


def full_campaign_view(campaign: Campaign) -> FullCampaignView:
    rows = list(
        campaign.attempts.filter(rerun_of__isnull=True)
        .order_by("cell_index")
        .values(
            "status",
            "outcome",
            "autonomous",
            "started_at",
            "finished_at",
            "full_cell__family",
            "full_cell__task",
            "full_cell__dimensions",
            "full_cell__scored",
        )
    )
    outcomes = [Outcome(r["outcome"]) if r["status"] == Attempt.Status.FINISHED else None for r in rows]
    results = [
        FullCellResult(
            family=row["full_cell__family"],
            task=row["full_cell__task"],
            variant=variant_of(row["full_cell__dimensions"]),
            dimensions=row["full_cell__dimensions"],
            scored=row["full_cell__scored"],
            outcome=outcome,
            autonomous=row["autonomous"],
        )
        for row, outcome in zip(rows, outcomes, strict=True)
    ]
    matrix = load_matrix(campaign.provenance["full_matrix"]["protocol"])
    maps = {}
    for family in dict.fromkeys(r.family for r in results):
        spec = matrix.families[family]["heat_map"]
        maps[family] = heat_maps(results, family, spec["rows"], spec["columns"], spec.get("split"))
    durations = [
        (r["finished_at"] - r["started_at"]).total_seconds() for r in rows if r["finished_at"] and r["started_at"]
    ]
    status = Counter(r["status"] for r in rows)
    remaining = len(rows) - status[Attempt.Status.FINISHED]
    eta = sum(durations) / len(durations) * remaining / max(1, status[Attempt.Status.RUNNING]) if durations else None
    return FullCampaignView(
        report=full_report(results),
        maps=maps,
        task_report=aggregate(CellResult(r.task, r.outcome, r.autonomous) for r in results),
        total=len(rows),
        finished=status[Attempt.Status.FINISHED],
        pending=status[Attempt.Status.PENDING],
        running=status[Attempt.Status.RUNNING],
        eta_s=eta if remaining else None,
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
