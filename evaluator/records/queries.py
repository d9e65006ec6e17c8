"""What the pages and exports ask of the records: a campaign's cells, its aggregates, sim-to-real."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import TypeVar

from django.core.cache import cache
from django.db.models import Count, F, Max, Sum

from evaluator.protocol import sim_to_real
from evaluator.protocol.aggregates import CellResult, Report, aggregate
from evaluator.protocol.full_matrix import FullMatrix, load_matrix
from evaluator.protocol.full_report import FullCellResult, FullReport, HeatMap, full_report, heat_maps, variant_of
from evaluator.protocol.scoring import Outcome
from evaluator.protocol.sim_to_real import NotComparable, SimRealComparison, reference, reference_task
from evaluator.protocol.sim_to_real_intervals import MetricIntervals, RatePoint, metric_intervals
from evaluator.records.models import (
    Attempt,
    Campaign,
    RealRobotRate,
)
from evaluator.records.result_flags import versions_of

T = TypeVar("T")


def campaign_cells(
    campaign: Campaign,
    statuses: tuple[str, ...] = (),
    window: tuple[int, int] | None = None,
    full_cell: bool = False,
    outcomes: tuple[str, ...] = (),
) -> list[Attempt]:
    """The campaign's original attempts, one per planned cell, in plan order (only those in `statuses`, or that ended
    with one of `outcomes`; only the [start, stop) slice of that order with `window`; a full matrix's cell loaded
    with `full_cell`)."""
    # Without the large JSON of each cell (provenance, a full matrix's cell): pages do not show them.
    cells = campaign.attempts.filter(rerun_of__isnull=True).select_related("task")
    cells = cells.defer("provenance") if full_cell else cells.defer("provenance", "full_cell")
    if statuses:
        cells = cells.filter(status__in=statuses)
    if outcomes:
        cells = cells.filter(outcome__in=outcomes)
    cells = cells.order_by("cell_index")
    return list(cells[window[0] : window[1]] if window else cells)


def cell_result(task: str, status: str, outcome: str, autonomous: bool) -> CellResult:
    """An original cell as the aggregates count it."""
    finished = status == Attempt.Status.FINISHED
    return CellResult(task, Outcome(outcome) if finished else None, autonomous, status == Attempt.Status.NOT_RUN)


def _report(rows: Iterable[tuple[str, str, str, bool]]) -> Report:
    """Aggregates of (task name, status, outcome, autonomous), one per original cell."""
    return aggregate(cell_result(*row) for row in rows)


def campaign_report(cells: list[Attempt]) -> Report:
    return _report((a.task.name, a.status, a.outcome, a.autonomous) for a in cells)


@dataclass(frozen=True)
class CampaignSummary:
    """What a campaign's page says of all its cells, whichever of them it draws."""

    report: Report
    statuses: Counter  # original cells by status
    error_types: Counter  # original cells that ended in an error, by its type (policy_setup, worker_lost, ...)

    @property
    def total(self) -> int:
        return sum(self.statuses.values())


def finished_state(campaign: Campaign) -> dict:
    """How many of the campaign's attempts have finished, the newest and the latest finish: finished attempts are only
    ever added, never changed (records/triggers.py), so these name the set of them (what is computed from it may be
    kept under them: the campaign's LeRobot archive, its time split)."""
    return campaign.attempts.filter(status=Attempt.Status.FINISHED).aggregate(
        count=Count("pk"), newest=Max("pk"), latest=Max("finished_at")
    )


def finished_key(state: dict) -> str:
    """A short name of a finished_state, for file names and cache keys."""
    return hashlib.sha256(repr(sorted(state.items())).encode()).hexdigest()[:16]


KEPT_S = 24 * 3600


def kept_for_finished(campaign: Campaign, state: dict, what: tuple, compute: Callable[[], T]) -> T:
    """What is computed from the campaign's finished attempts alone (`what` names it and its choices), kept in the
    cache under their finished_state: a campaign's page asks it on every request, and it changes only when a cell
    finishes. Never None: a None computed is asked again."""
    name = repr((campaign.pk, finished_key(state), what)).encode()
    key = f"rsi:finished:{hashlib.sha256(name).hexdigest()}"
    value = cache.get(key)
    if value is None:
        value = compute()
        cache.set(key, value, timeout=KEPT_S)
    return value


def policy_versions(campaign: Campaign, state: dict | None = None) -> list[str]:
    """The versions its policy server reported (a `policy_version` in its replies), in the order first seen over
    its attempts as they started; more than one: the weights behind its URL changed while it ran. Read from the
    accounting an attempt stores as it finishes: kept under the campaign's finished_state (given, or asked here)."""
    state = state if state is not None else finished_state(campaign)
    return kept_for_finished(campaign, state, ("versions",), lambda: versions_of([campaign.pk])[campaign.pk])


def campaign_summary(campaign: Campaign) -> CampaignSummary:
    """One query over five columns of the original cells, however many there are (no model objects)."""
    return campaign_summaries([campaign.pk])[campaign.pk]


def campaign_summaries(campaign_ids: Iterable[int]) -> dict[int, CampaignSummary]:
    """campaign_summary of many campaigns from one query over their original cells (a leaderboard's rows)."""
    rows: dict[int, list] = {pk: [] for pk in campaign_ids}
    cells = Attempt.objects.filter(campaign_id__in=list(rows), rerun_of__isnull=True)
    columns = ("campaign_id", "task__name", "status", "outcome", "autonomous", "error_type")
    for campaign_id, *row in cells.values_list(*columns):
        rows[campaign_id].append(row)
    return {
        pk: CampaignSummary(
            report=_report(row[:4] for row in found),
            statuses=Counter(row[1] for row in found),
            error_types=Counter(row[4] for row in found if row[4]),
        )
        for pk, found in rows.items()
    }


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
    open: int  # pending, queued or running: what a cancel would leave not run or stop
    eta_s: float | None  # at the pace so far: mean duration of finished cells, over the cells running now


@dataclass(frozen=True)
class FinishedCells:
    """What a full campaign's page shows of its finished cells: their reports, heat maps and pace."""

    report: FullReport
    maps: dict[str, list[HeatMap]]
    task_report: Report
    spent_s: float  # the finished cells' summed durations
    timed: int


def full_campaign_view(campaign: Campaign, state: dict | None = None) -> FullCampaignView:
    """The full campaign's reports and heat maps (kept under its finished_state, given or asked here), with the
    counts of its cells by status now."""
    state = state if state is not None else finished_state(campaign)
    finished = kept_for_finished(campaign, state, ("full_view",), lambda: finished_cells(campaign))
    cells = campaign.attempts.filter(rerun_of__isnull=True)
    status = Counter(dict(cells.order_by().values_list("status").annotate(count=Count("pk"))))
    total = sum(status.values())
    remaining = total - status[Attempt.Status.FINISHED]
    eta = None
    if remaining and finished.timed:
        eta = finished.spent_s / finished.timed * remaining / max(1, status[Attempt.Status.RUNNING])
    return FullCampaignView(
        report=finished.report,
        maps=finished.maps,
        task_report=finished.task_report,
        total=total,
        finished=status[Attempt.Status.FINISHED],
        pending=status[Attempt.Status.PENDING],
        running=status[Attempt.Status.RUNNING],
        open=sum(status[s] for s in Attempt.OPEN),
        eta_s=eta,
    )


def finished_cells(campaign: Campaign) -> FinishedCells:
    matrix = load_matrix(campaign.provenance["full_matrix"]["protocol"])
    cells = campaign.attempts.filter(rerun_of__isnull=True).order_by("cell_index")
    rows = list(cells.values_list("status", "outcome", "autonomous"))
    results = [
        FullCellResult(
            family=family,
            task=task,
            variant=variant_of(dimensions),
            dimensions=dimensions,
            scored=scored,
            outcome=Outcome(outcome) if status == Attempt.Status.FINISHED else None,
            autonomous=autonomous,
        )
        for (status, outcome, autonomous), (family, task, dimensions, scored) in zip(
            rows, planned_cells(campaign, cells, matrix, len(rows)), strict=True
        )
    ]
    maps = {}
    for family in dict.fromkeys(r.family for r in results):
        spec = matrix.families[family]["heat_map"]
        maps[family] = heat_maps(results, family, spec["rows"], spec["columns"], spec.get("split"))
    timed = cells.filter(status=Attempt.Status.FINISHED, started_at__isnull=False, finished_at__isnull=False)
    pace = timed.aggregate(spent=Sum(F("finished_at") - F("started_at")), count=Count("pk"))
    return FinishedCells(
        report=full_report(results),
        maps=maps,
        task_report=aggregate(CellResult(r.task, r.outcome, r.autonomous) for r in results),
        spent_s=pace["spent"].total_seconds() if pace["count"] else 0.0,
        timed=pace["count"],
    )


def planned_cells(campaign: Campaign, cells, matrix: FullMatrix, count: int) -> list[tuple[str, str, dict, bool]]:
    """Each cell's family, task, dimensions and scoring, in plan order. Taken from the matrix when the campaign was
    planned from this very file (its checksum is in the identity): its cells are the matrix's cells of the families
    it names, in matrix order, one per cell index. Decoding 1,992 cells' JSON from the records costs the page more
    than all the rest of its work."""
    planned_from = campaign.provenance["full_matrix"]
    if planned_from["sha256"] == matrix.sha256:
        planned = matrix.subset(list(planned_from["families"]))
        if len(planned) == count:
            return [(c.family, c.task, dict(c.dimensions), c.scored) for c in planned]
    recorded = cells.values_list("full_cell", flat=True)
    return [(c["family"], c["task"], c["dimensions"], c["scored"]) for c in recorded]


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


@dataclass(frozen=True)
class SimToRealTask:
    task: str
    points: tuple[dict, ...]  # per policy with both rates: name, label, simulated, real, where each comes from
    comparison: SimRealComparison | None
    problem: str  # why there is no comparison
    intervals: MetricIntervals | None = None  # bootstrap intervals of both metrics, from 3 policies


REFERENCE = "ref:"  # the reference policies' names, apart from RSI's own policy names


def simulated_rates(protocol: str = "visual_matching") -> dict[str, dict[str, tuple[float, str, int]]]:
    """{task: {policy name: (success over attempted scored cells, "campaign N", attempted)}} from each policy's newest
    full campaign of that matrix; errors count as failures, human-intervened attempts do not count."""
    rates: dict[str, dict[str, tuple[float, str, int]]] = {}
    seen = set()
    full = Campaign.objects.filter(mode=Campaign.Mode.FULL, provenance__full_matrix__protocol=protocol)
    for campaign in full.select_related("policy").order_by("-created_at"):
        if campaign.policy.name in seen:
            continue
        tally: dict[str, list[int]] = {}
        rows = campaign.attempts.filter(rerun_of__isnull=True, status=Attempt.Status.FINISHED, autonomous=True)
        for row in rows.filter(full_cell__scored=True).values("outcome", "full_cell__family", "full_cell__task"):
            counts = tally.setdefault(reference_task(row["full_cell__family"], row["full_cell__task"]), [0, 0])
            counts[0] += row["outcome"] == Outcome.SUCCESS.value
            counts[1] += 1
        if tally:
            seen.add(campaign.policy.name)
        for task, (successes, attempted) in tally.items():
            rates.setdefault(task, {})[campaign.policy.name] = (
                successes / attempted,
                f"campaign {campaign.pk}",
                attempted,
            )
    return rates


def sim_to_real_points(protocol: str = "visual_matching") -> dict[str, list[dict]]:
    """Per sim-to-real task, every policy with both a simulated and a real rate: the reference policies'
    published rates and RSI's policies' (simulated from their full campaigns, real as users entered them)."""
    ref = reference()
    simulated = simulated_rates(protocol)
    real_entered: dict[str, dict[str, tuple[float, str, int | None]]] = {}
    for entry in RealRobotRate.objects.select_related("policy"):
        real_entered.setdefault(entry.task, {})[entry.policy.name] = (entry.rate, entry.source, entry.trials)
    points = {}
    for task in ref["real"]:
        points[task] = [
            {
                "name": REFERENCE + name,
                "label": ref["policies"].get(name, name),
                "simulated": ref["simulated_visual_matching"][task][name],
                "real": real,
                "simulated_from": "published (SimplerEnv paper)",
                "real_from": "published (SimplerEnv paper)",
                "simulated_trials": None,  # the paper's rates come without their episode counts here
                "real_trials": None,
            }
            for name, real in ref["real"][task].items()
            if protocol == "visual_matching" and name in ref["simulated_visual_matching"].get(task, {})
        ]
        for name, (sim, where, attempted) in simulated.get(task, {}).items():
            if name in real_entered.get(task, {}):
                real, source, trials = real_entered[task][name]
                points[task].append(
                    {
                        "name": name,
                        "label": name,
                        "simulated": sim,
                        "real": real,
                        "simulated_from": where,
                        "real_from": source,
                        "simulated_trials": attempted,
                        "real_trials": trials,
                    }
                )
    return points


def sim_to_real_report(points: dict[str, list[dict]], chosen: Collection[str] | None = None) -> list[SimToRealTask]:
    """Per task, Pearson's r and MMRV over the chosen policies (all when none are chosen)."""
    report = []
    for task, every in points.items():
        selected = tuple(p for p in every if chosen is None or p["name"] in chosen)
        try:
            simulated_by, real_by = ({p["name"]: p[side] for p in selected} for side in ("simulated", "real"))
            comparison = sim_to_real.compare(task, simulated_by, real_by)
            problem = ""
        except NotComparable as exc:
            comparison, problem = None, str(exc)
        intervals = None
        if comparison:
            rates = [
                RatePoint(p["name"], p["simulated"], p["real"], p["simulated_trials"], p["real_trials"])
                for p in selected
            ]
            intervals = metric_intervals(rates)
        report.append(SimToRealTask(task, selected, comparison, problem, intervals))
    return report
