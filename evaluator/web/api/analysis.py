"""Analysis through the API: how many pairs a question needs (GET /plan, the launch preview's numbers for any
difference), and which variation hurts a full campaign's policy (GET /campaigns/{id}/variation). The numbers are the
protocol core's (evaluator/protocol/power.py, factors.py); docs/statistics.md has each method."""

from __future__ import annotations

import contextlib
import os
import threading
from urllib.parse import urlencode

from django.shortcuts import get_object_or_404
from ninja import Field, Query, Router, Schema
from ninja.throttling import AuthRateThrottle

from evaluator.protocol.paired import DEFAULT_LEVEL, DEFAULT_MARGIN
from evaluator.records.models import Campaign
from evaluator.records.pairwise import compare_campaign_set
from evaluator.records.power_plans import plan_against
from evaluator.records.stages import campaign_stages
from evaluator.records.variation import factor_choice, variation_report
from evaluator.web.api.common import link, operation
from evaluator.web.api.errors import ApiError
from evaluator.web.api.schemas import PairedOut, PairwiseOut, RateOut

router = Router(tags=["analysis"])


class FixedDesignOut(Schema):
    power: float
    pairs: int | None = Field(description="the smallest number of pairs reaching that power; null: more than computed")
    more_than: bool
    fits_baseline: bool | None = Field(description="whether the baseline campaign has that many cells to pair with")


class SequentialPlanOut(Schema):
    runs: int = Field(description="simulated campaigns (seeded: the same numbers on every call)")
    most_pairs: int = Field(description="the pairs it may run: the baseline's cells, or 3 x the 80% design's")
    mean_pairs: float
    mean_standard_error: float = Field(description="the mean's Monte Carlo standard error")
    median_pairs: float
    decided_share: float
    right_direction_share: float
    method: str


class PlanOut(Schema):
    baseline_campaign: int | None
    baseline_success_rate: RateOut | None = Field(description="the baseline campaign's rate the plan starts from")
    baseline_rate: float
    difference: float
    candidate_rate: float
    only_a_chance: float = Field(description="p10: the chance a pair is the baseline's success and B's failure")
    only_b_chance: float
    discordance: float = Field(description="the share of pairs whose outcomes differ (independence unless stated)")
    level: float
    margin: float
    fixed_design: list[FixedDesignOut] = Field(description="80% and 90% power")
    fixed_method: str
    most_pairs_computed: int
    baseline_cells: int | None
    sequential: SequentialPlanOut | None = Field(
        description="null when it would run more than most_pairs_simulated pairs (or the fixed design needs more "
        "than most_pairs_computed)"
    )
    most_pairs_simulated: int


# A plan not planned before simulates 400 sequential campaigns (seconds of CPU): each caller may ask PLANS_A_MINUTE a
# minute, and PLANS_AT_ONCE are planned at a time; a plan planned before is answered from the core's cache.
PLANS_A_MINUTE = 30
PLANS_AT_ONCE = max(1, len(os.sched_getaffinity(0)) // 2)
PLANNING = threading.BoundedSemaphore(PLANS_AT_ONCE)
PLANNING_WAIT_S = 5.0


@contextlib.contextmanager
def planning_slot():
    """One of the PLANS_AT_ONCE planning slots, or a 429 once PLANNING_WAIT_S has passed without one."""
    if not PLANNING.acquire(timeout=PLANNING_WAIT_S):
        raise ApiError(429, "throttled", f"{PLANS_AT_ONCE} plans are being simulated: ask again in a few seconds")
    try:
        yield
    finally:
        PLANNING.release()


@operation(
    router,
    "GET",
    "/plan",
    permission="view_campaign",
    response=PlanOut,
    throttle=AuthRateThrottle(f"{PLANS_A_MINUTE}/min"),
)
def get_plan(
    request,
    difference: float = Query(..., description="the difference to detect, B - A in success rate (e.g. 0.1)"),
    baseline: int | None = Query(None, description="a baseline campaign: its success rate and cells"),
    baseline_rate: float | None = Query(None, description="or a stated baseline success rate"),
    discordance: float | None = Query(None, description="the share of pairs expected to differ (default: independent)"),
    level: float = DEFAULT_LEVEL,
    margin: float = DEFAULT_MARGIN,
):
    """The pairs a fixed paired design needs to detect `difference` at 80% and 90% power (McNemar's exact test,
    summed exactly), and the pairs a sequential campaign over the baseline's cells takes, simulated."""
    campaign = get_object_or_404(Campaign, pk=baseline) if baseline is not None else None
    with planning_slot():
        plan, rate = plan_against(campaign, baseline_rate, difference, level, margin, discordance)
    return {
        "baseline_campaign": baseline,
        "baseline_success_rate": rate.as_dict() if rate else None,
        **plan.as_dict(),
    }


class LevelOut(Schema):
    level: str
    success_rate: RateOut
    against_base: PairedOut = Field(description="this level (B) against the base (A) on the cells that pair")
    failing_attempts: list[int] = Field(description="the first 20 attempts that failed the task at this level")
    failure_count: int
    failing_url: str = Field(description="the attempts table: this level's task failures in this campaign")


class FactorOut(Schema):
    factor: str
    success_rate: RateOut
    base_cells_paired: int
    effect: float | None = Field(description="mean over base cells of (the levels' mean success - the base's)")
    interval_low: float | None
    interval_high: float | None
    interval_method: str
    scored: bool = Field(description="false when upstream's metric scores none of its cells (the camera variants)")
    levels: list[LevelOut]


class VariationOut(Schema):
    campaign: int
    dimension: str
    base: str
    grouped: bool = Field(description="the levels' kinds are the factors (Variant Aggregation's variants)")
    level: float
    base_success_rate: RateOut
    factors: list[FactorOut] = Field(description="the most harmful first")


@operation(router, "GET", "/campaigns/{campaign_id}/variation", permission="view_campaign", response=VariationOut)
def get_variation(
    request,
    campaign_id: int,
    dimension: str = Query("", description="an axis of the matrix (default: variant, or urdf_version)"),
    base: str = Query("", description="the base level of that axis (default: the matrix's base)"),
    level: float = DEFAULT_LEVEL,
):
    """Which variation hurts: per factor and level of a full campaign, the success rate and the paired difference
    against the family's base condition on the same episode, the factors ordered by effect."""
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    if campaign.mode != Campaign.Mode.FULL:
        raise ApiError(422, "not_a_full_campaign", f"campaign {campaign_id} is not a full matrix: it has no variations")
    choice = factor_choice(campaign, dimension, base)
    report = variation_report(campaign, choice, level).as_dict()
    table = link(request, "evaluator:attempts")
    for factor in report["factors"]:
        for row in factor["levels"]:
            cell = urlencode(
                {"campaign": campaign_id, "outcome": "task_failure", "cell": f"{choice.dimension}={row['level']}"}
            )
            row["failing_url"] = f"{table}?{cell}"
    return {"campaign": campaign_id, **choice.as_dict(), **report}


class ComparedCampaignOut(Schema):
    campaign: int
    policy: str
    group: str = Field(description="letters: campaigns sharing one cannot be told apart")
    url: str


class ManyOut(Schema):
    protocol_id: str
    campaigns: list[ComparedCampaignOut] = Field(description="best success rate first: the letters follow this order")
    pairwise: PairwiseOut


@operation(router, "GET", "/pairwise", permission="view_campaign", response=ManyOut)
def get_pairwise(
    request,
    campaign: list[int] = Query(..., description="two to 40 campaigns of one protocol identity (repeatable)"),
    level: float = DEFAULT_LEVEL,
):
    """Many policies at once: every pair of the campaigns compared on its common cells (Tango's interval, McNemar's
    exact test), the p-values Holm-adjusted, and the campaigns grouped by letters into sets that cannot be told
    apart."""
    campaigns, comparison = compare_campaign_set(campaign, level)
    return {
        "protocol_id": campaigns[0].protocol.protocol_id,
        "campaigns": [
            {
                "campaign": c.pk,
                "policy": c.policy.name,
                "group": comparison.groups[c.pk],
                "url": link(request, "evaluator:campaign", c.pk),
            }
            for c in campaigns
        ],
        "pairwise": comparison.as_dict(),
    }


class StagesOut(Schema):
    campaign: int
    source: str
    words: dict[str, str] = Field(description="each stage in words")
    overall: dict[str, RateOut] = Field(description="per stage: episodes that reached it (Wilson 95%)")
    per_task: dict[str, dict[str, RateOut]]


@operation(router, "GET", "/campaigns/{campaign_id}/stages", permission="view_campaign", response=StagesOut)
def get_stages(request, campaign_id: int):
    """Partial credit where the benchmark reports it: per task and overall, the rate of each stage SimplerEnv's own
    episode stats say an episode reached (grasped, lifted, near the target...), over the autonomous
    protocol-completed episodes; empty where the benchmark reports none."""
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    return {"campaign": campaign_id, **campaign_stages(campaign).as_dict()}
