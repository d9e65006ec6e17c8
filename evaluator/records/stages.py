"""Partial credit from the records: each autonomous, protocol-completed original cell's last step's episode stats,
read in one query per set of campaigns, as the stages it reached (evaluator/protocol/stages.py)."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import JSONField, OuterRef, Subquery

from evaluator.protocol.paired import DEFAULT_LEVEL, DEFAULT_MARGIN, PairedComparison
from evaluator.protocol.scoring import Outcome
from evaluator.protocol.stages import StageReport, paired_stages, stage_rates, stages_of
from evaluator.records.models import Attempt, Campaign, Step
from evaluator.records.queries import finished_state, kept_for_finished
from evaluator.records.sequential import DIMENSIONS, cell_key

COMPLETED = (Outcome.SUCCESS.value, Outcome.TASK_FAILURE.value)


def reached_stages(campaign_ids: Iterable[int]) -> dict[int, dict[tuple, tuple[str, dict[str, bool]]]]:
    """Per campaign, per pairing key: (task, the stages reached) of each cell that counts in the success rate and
    whose benchmark reports stages."""
    found: dict[int, dict] = {pk: {} for pk in campaign_ids}
    last_info = Step.objects.filter(attempt=OuterRef("pk")).order_by("-index").values("info")[:1]
    rows = (
        Attempt.objects.filter(
            campaign_id__in=list(found), rerun_of__isnull=True, status=Attempt.Status.FINISHED, autonomous=True
        )
        .filter(outcome__in=COMPLETED)
        .annotate(final_info=Subquery(last_info, output_field=JSONField()))
        .values_list("campaign_id", "task__name", "seed", DIMENSIONS, "final_info")
    )
    for campaign_id, task, seed, dimensions, info in rows:
        reached = stages_of((info or {}).get("episode_stats"))
        if reached is not None:
            found[campaign_id][cell_key(task, seed, dimensions)] = (task, reached)
    return found


def campaign_stages(campaign: Campaign, state: dict | None = None) -> StageReport:
    """Each stage's rate per task and overall (empty where the benchmark reports no stage); kept under the campaign's
    finished_state (given, or asked here): it reads finished cells alone."""
    state = state if state is not None else finished_state(campaign)
    return kept_for_finished(
        campaign, state, ("stages",), lambda: stage_rates(reached_stages([campaign.pk])[campaign.pk].values())
    )


def compared_stages(
    a: Campaign, b: Campaign, level: float = DEFAULT_LEVEL, margin: float = DEFAULT_MARGIN
) -> dict[str, PairedComparison]:
    """Each stage of B against A over the cells both ran to an autonomous, protocol-completed end."""
    found = reached_stages([a.pk, b.pk])
    common = found[a.pk].keys() & found[b.pk].keys()
    return paired_stages(((found[a.pk][k][1], found[b.pk][k][1]) for k in common), level, margin)
