"""Sequential campaigns: a campaign run against a finished baseline, which stops once its test has decided.

The test is the protocol core's (evaluator/protocol/sequential.py). Here: which cells of two campaigns pair (by
task and seed), whether a baseline can serve (`baseline_problems`, asked by launching), the pairs in the order
the candidate's cells finished, and `do_update_sequential`, run after each of its attempts finishes: once the
confidence sequence has decided, every cell not yet started is left as not run (a final status, never a failure)
with the reason on it. Starting queues a sequential campaign's cells in its predeclared order (`start_order`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from evaluator.protocol.aggregates import CellResult
from evaluator.protocol.paired import pair_of
from evaluator.protocol.sequential import SequentialRule, SequentialState, sequential_state
from evaluator.records.models import Attempt, Campaign
from evaluator.records.queries import cell_result

# A full cell's dimensions alone: the rest of its JSON (kwargs, options, assets) is large and pairs nothing.
DIMENSIONS = "full_cell__dimensions"
CELL_COLUMNS = ("task__name", "seed", DIMENSIONS, "status", "outcome", "autonomous")


def cell_key(task: str, seed: int, dimensions: dict | None) -> tuple:
    """What pairs two campaigns' cells: the task and seed, and a full matrix cell's dimensions."""
    return (task, seed, json.dumps(dimensions, sort_keys=True) if dimensions else "")


def cells_by_key(campaign: Campaign) -> dict[tuple, CellResult]:
    """The campaign's original cells, as the aggregates count them, by pairing key: one query."""
    return cells_by_key_of([campaign.pk])[campaign.pk]


def cells_by_key_of(campaign_ids: Iterable[int]) -> dict[int, dict[tuple, CellResult]]:
    """cells_by_key of many campaigns from one query (a leaderboard's rows, compared pair by pair)."""
    found: dict[int, dict[tuple, CellResult]] = {pk: {} for pk in campaign_ids}
    rows = (
        Attempt.objects.filter(campaign_id__in=list(found), rerun_of__isnull=True)
        .order_by("campaign_id", "cell_index")
        .values_list("campaign_id", *CELL_COLUMNS)
    )
    for campaign_id, task, seed, dimensions, status, outcome, autonomous in rows:
        found[campaign_id][cell_key(task, seed, dimensions)] = cell_result(task, status, outcome, autonomous)
    return found


def rule_of(campaign: Campaign) -> SequentialRule | None:
    return SequentialRule.from_dict(campaign.sequential) if campaign.sequential else None


def baseline_problems(
    baseline: Campaign, benchmark: str, task_names: Iterable[str], seeds: Iterable[int], protocol_id: str
) -> list[str]:
    """Why `baseline` cannot serve a sequential plan of these cells, every reason at once (none: it can)."""
    problems = []
    if baseline.mode == Campaign.Mode.FULL:
        problems.append(
            f"campaign {baseline.pk} is a full-matrix campaign: a sequential campaign pairs task-and-seed cells"
        )
    if baseline.protocol.protocol_id != protocol_id:
        problems.append(
            f"campaign {baseline.pk} ran under {baseline.protocol.protocol_id}, the plan is {protocol_id}: "
            "results of different protocol identities are never compared"
        )
    unfinished = baseline.attempts.filter(rerun_of__isnull=True).exclude(status=Attempt.Status.FINISHED).count()
    if unfinished:
        problems.append(
            f"campaign {baseline.pk} has {unfinished} cell{'s' if unfinished != 1 else ''} without an outcome: "
            "a baseline must have finished every cell"
        )
    tasks, seeds = sorted(set(task_names)), sorted(set(seeds))
    baseline_tasks = sorted(set(baseline.task_names))
    if (baseline_tasks, sorted(set(baseline.seeds))) != (tasks, seeds):
        problems.append(
            f"the plan's cells must be campaign {baseline.pk}'s: its tasks {', '.join(baseline_tasks)} and seeds "
            f"{_seed_text(baseline.seeds)}, the plan's {', '.join(tasks) or 'none'} and {_seed_text(seeds)}"
        )
    return problems


def _seed_text(seeds: Iterable[int]) -> str:
    seeds = sorted(set(seeds))
    shown = ", ".join(map(str, seeds[:8]))
    return f"[{shown}{', ...' if len(seeds) > 8 else ''}] ({len(seeds)})"


def sequential_pairs(campaign: Campaign, rule: SequentialRule) -> list[tuple[bool, bool]]:
    """(the baseline's success, the candidate's) for each pair, in the order the candidate's cells finished."""
    baseline = cells_by_key(Campaign.objects.get(pk=rule.baseline))
    finished = (
        campaign.attempts.filter(rerun_of__isnull=True, status=Attempt.Status.FINISHED)
        .order_by("finished_at", "pk")
        .values_list(*CELL_COLUMNS)
    )
    pairs = []
    for task, seed, dimensions, status, outcome, autonomous in finished:
        pair = pair_of(baseline.get(cell_key(task, seed, dimensions)), cell_result(task, status, outcome, autonomous))
        if not isinstance(pair, str):
            pairs.append(pair)
    return pairs


def sequential_state_of(campaign: Campaign) -> SequentialState | None:
    """The campaign's confidence sequence and verdict so far; None for a campaign not run against a baseline."""
    rule = rule_of(campaign)
    if rule is None:
        return None
    return sequential_state(sequential_pairs(campaign, rule), rule.level, rule.margin)


def do_update_sequential(campaign: Campaign) -> int:
    """After one of its attempts finished: once the test has decided, every cell not yet started is left as not
    run, with the reason. Returns how many were left (0 while undecided, and for a fixed campaign)."""
    state = sequential_state_of(campaign)
    if state is None or not state.decided:
        return 0
    reason = (
        f"not run: the sequential test against campaign {campaign.sequential['baseline']} decided "
        f"{state.verdict.label} after {state.decided_at} pairs"
    )
    # Conditional on the status: a cell an executor claims meanwhile runs, and is counted when it finishes.
    return campaign.attempts.filter(
        rerun_of__isnull=True, status__in=(Attempt.Status.PENDING, Attempt.Status.QUEUED)
    ).update(status=Attempt.Status.NOT_RUN, error_detail=reason, runner="")


def cells_not_run(campaign: Campaign) -> int:
    """How many cells the campaign's stop saved."""
    return campaign.attempts.filter(rerun_of__isnull=True, status=Attempt.Status.NOT_RUN).count()


def start_order(attempt_ids: Iterable[int]) -> list[int]:
    """Attempts in the order they are to start: a sequential campaign's cells in its predeclared order, the rest
    by campaign and plan order."""
    rows = list(Attempt.objects.filter(pk__in=list(attempt_ids)).values_list("pk", "campaign_id", "cell_index"))
    campaigns = {row[1] for row in rows}
    positions = {
        campaign_id: {cell: position for position, cell in enumerate(sequential["order"])}
        for campaign_id, sequential in Campaign.objects.filter(pk__in=campaigns).values_list("pk", "sequential")
        if sequential
    }

    def position(row) -> tuple:
        pk, campaign_id, cell_index = row
        order = positions.get(campaign_id)
        return (campaign_id, order[cell_index] if order else cell_index, pk)

    return [row[0] for row in sorted(rows, key=position)]
